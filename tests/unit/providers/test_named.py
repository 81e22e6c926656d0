"""Named providers (``[providers.NAME] use = …``) and presets, through the configuration files and
the router a run gets, with in-memory providers registered the way a third party would."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CancelSignal,
    ProviderCapabilities,
    ProviderEvent,
)
from workflow_mcp.providers.config import ProviderConfigError, load_config
from workflow_mcp.providers.named import PRESETS, named_providers, probe_named, resolve_provider
from workflow_mcp.providers.policy import Policy
from workflow_mcp.providers.registry import (
    Availability,
    ProviderUnavailableError,
    UnknownProviderError,
    register_provider,
    unregister_provider,
)
from workflow_mcp.providers.routing import RoutingProvider, build_router


class Echo:
    """Answers ``<name>:<model>:<prompt>``; ``fail`` makes every call a provider failure."""

    def __init__(self, name: str, fail: bool, images: bool = False) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(streaming=True, images=images)
        self.fail = fail
        self.calls: list[AgentRequest] = []
        self.closed = False

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.calls.append(request)
        if self.fail:
            return AgentResult(outcome="provider_failed", message=f"{self.name} is down")
        return AgentResult(text=f"{self.name}:{request.model}:{request.prompt}")

    async def aclose(self) -> None:
        self.closed = True


class EchoFactory:
    """A third-party style factory: capabilities, a probe, and ``create`` checking its one setting."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(streaming=True)
        self.built: list[Echo] = []

    def probe(self, settings: Any) -> Availability:
        return Availability(True, version="1.0")

    def create(self, settings: Any, *, policy: Policy, source: str) -> Echo:
        for key in set(settings) - {"fail", "images"}:
            raise ProviderConfigError(source, f"providers.{self.name}.{key}", "unknown setting")
        self.built.append(Echo(self.name, bool(settings.get("fail")), bool(settings.get("images"))))
        return self.built[-1]


@pytest.fixture
def registered() -> Iterator[dict[str, EchoFactory]]:
    factories = {"alpha": EchoFactory("alpha"), "beta": EchoFactory("beta")}
    for name, factory in factories.items():
        register_provider(name, factory)
    yield factories
    for name in factories:
        unregister_provider(name)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def user_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "state" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def project_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "repo" / "workflow-mcp.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ask(router: RoutingProvider, **fields: Any) -> AgentResult:
    async def emit(event: ProviderEvent) -> None:
        return None

    request = AgentRequest(**{"prompt": "p", "label": "l", **fields})
    return asyncio.run(
        asyncio.wait_for(router.execute(request, AgentContext(signal=CancelSignal(), emit=emit)), 10)
    )


TWO_NAMED = """
default = "writer"

[[rules]]
phase = "Review*"
provider = "reviewer"

[providers.writer]
use = "alpha"

[providers.reviewer]
use = "alpha"
fail = true

[providers.reviewer.models]
opus = "alpha-large"
"""


def test_two_named_providers_of_one_kind_are_routed_by_name_each_with_its_own_settings(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    user_file(tmp_path, TWO_NAMED)
    router = build_router(cwd=str(tmp_path), environ=home)
    assert set(router.providers) == {"writer", "reviewer"}
    assert router.route_of(AgentRequest(prompt="", label="x", phase="Review 1")) == "reviewer"
    assert router.route_of(AgentRequest(prompt="", label="x", phase="Build")) == "writer"
    assert ask(router, phase="Build", model="m-1").text == "alpha:m-1:p"
    failed = ask(router, phase="Review 1", model="opus")  # its own settings (fail) and alias map
    assert failed.outcome == "provider_failed"
    built = registered["alpha"].built
    assert len(built) == 2 and [b.fail for b in built] == [False, True]
    assert built[1].calls[0].model == "alpha-large"


def test_provider_forces_a_named_provider_by_its_name(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    user_file(tmp_path, TWO_NAMED)
    router = build_router(provider="reviewer", cwd=str(tmp_path), environ=home)
    assert router.name == "reviewer"
    assert router.route_of(AgentRequest(prompt="", label="x", phase="Build")) == "reviewer"


def test_a_project_file_routes_to_the_users_named_providers_and_adds_settings(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    user_file(tmp_path, '[providers.reviewer]\nuse = "beta"\n[providers.reviewer.models]\nopus = "b-1"\n')
    project_file(
        tmp_path,
        'default = "reviewer"\n[providers.reviewer]\nfail = true\n[providers.reviewer.models]\nhaiku = "b-0"\n',
    )
    conf = load_config(tmp_path / "repo", home)
    assert conf.uses == {"reviewer": "beta"}
    assert conf.settings["reviewer"] == {"fail": True}
    assert conf.models["reviewer"] == {"opus": "b-1", "haiku": "b-0"}
    router = build_router(cwd=str(tmp_path / "repo"), environ=home, config=conf)
    assert ask(router).outcome == "provider_failed"
    assert registered["beta"].built[0].fail is True


def test_a_project_file_may_not_define_what_a_provider_name_runs(
    tmp_path: Path, home: dict[str, str]
) -> None:
    project_file(tmp_path, '[providers.mine]\nuse = "acp"\n')
    with pytest.raises(ProviderConfigError, match="only in the user") as caught:
        load_config(tmp_path / "repo", home)
    assert caught.value.key == "providers.mine.use"


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        (
            '[providers.x]\nuse = "nosuch"',
            "providers.x.use",
            "unknown provider 'nosuch'; registered providers:",
        ),
        (
            '[providers.x]\nuse = "alpha"\n[providers.y]\nuse = "x"',
            "providers.y.use",
            "names the named provider 'x'; use names a registered provider or a preset",
        ),
        (
            '[providers.alpha]\nuse = "beta"',
            "providers.alpha.use",
            "'alpha' is the name of a registered provider",
        ),
        ('[providers.x]\nuse = "has space"', "providers.x.use", "must be a provider name"),
    ],
)
def test_a_use_that_cannot_be_followed_is_refused_naming_the_key(
    tmp_path: Path,
    home: dict[str, str],
    registered: dict[str, EchoFactory],
    table: str,
    key: str,
    words: str,
) -> None:
    path = user_file(tmp_path, 'default = "alpha"\n' + table + "\n")
    with pytest.raises(ProviderConfigError) as caught:
        build_router(cwd=str(tmp_path), environ=home)
    assert caught.value.key == key and caught.value.path == str(path)
    assert words in str(caught.value)


def test_a_bad_setting_of_a_named_provider_names_its_own_key(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    user_file(tmp_path, 'default = "mine"\n[providers.mine]\nuse = "alpha"\nbogus = 1\n')
    with pytest.raises(ProviderConfigError) as caught:
        build_router(cwd=str(tmp_path), environ=home)
    assert caught.value.key == "providers.mine.bogus"


def test_a_bad_acp_setting_of_a_named_provider_names_its_own_key(
    tmp_path: Path, home: dict[str, str]
) -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")
    user_file(tmp_path, 'default = "mine"\n[providers.mine]\nuse = "acp"\ncommand = "sh"\nmax_sessions = 0\n')
    with pytest.raises(ProviderConfigError) as caught:
        build_router(cwd=str(tmp_path), environ=home)
    assert caught.value.key == "providers.mine.max_sessions"
    assert "must be at least 1, got 0" in str(caught.value)


def test_an_unknown_name_lists_the_configured_registered_and_preset_names(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    user_file(tmp_path, 'default = "nosuch"\n[providers.mine]\nuse = "alpha"\n')
    with pytest.raises(UnknownProviderError) as caught:
        build_router(cwd=str(tmp_path), environ=home)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'state' / 'config.toml'}: default: unknown provider 'nosuch'")
    assert all(f"{name}," in message or f"{name} " in message for name in ("mine", "alpha", "gemini", "qwen"))


def executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_presets_are_acp_providers_found_on_path_and_a_table_adds_settings(
    tmp_path: Path, home: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert {"gemini", "opencode", "qwen", "goose", "codex-acp", "claude-agent-acp"} <= set(PRESETS)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    user_file(tmp_path, '[providers.qwen]\nmodel = "qwen3-coder"\n')
    conf = load_config(tmp_path, home)
    qwen = resolve_provider("qwen", conf)
    assert (qwen.use, qwen.origin, dict(qwen.settings)) == (
        "acp",
        "preset",
        {"command": "qwen", "model": "qwen3-coder"},
    )
    assert qwen.found is False
    executable(tmp_path / "bin", "qwen")
    assert qwen.found is True
    # A named provider may use a preset: its command, with settings of its own.
    user_file(tmp_path, '[providers.qwen-max]\nuse = "qwen"\nmodel = "qwen3-max"\n')
    conf = load_config(tmp_path, home)
    derived = resolve_provider("qwen-max", conf)
    assert (derived.use, derived.origin, dict(derived.settings)) == (
        "acp",
        "configured",
        {"command": "qwen", "model": "qwen3-max"},
    )
    listed = {n.name: n for n in named_providers(conf)}
    assert listed["gemini"].found is False and listed["qwen"].found is True
    assert listed["fake"].origin == "registered" and listed["fake"].found is None


def test_a_preset_whose_program_is_missing_is_refused_with_its_install_command(
    tmp_path: Path, home: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    user_file(tmp_path, 'default = "gemini"\n')
    with pytest.raises(ProviderUnavailableError) as caught:
        build_router(cwd=str(tmp_path), environ=home)
    assert (
        "provider 'gemini' is not available: the ACP agent 'gemini' is not an executable file or on PATH"
        in str(caught.value)
    )
    assert "install it with: npm install -g @google/gemini-cli" in str(caught.value)


def test_a_named_provider_is_probed_under_its_own_name(
    tmp_path: Path, home: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")
    agent = executable(tmp_path / "bin", "my-agent")
    user_file(tmp_path, f'[providers.mine]\nuse = "acp"\ncommand = "{agent}"\n')
    info = probe_named(resolve_provider("mine", load_config(tmp_path, home))).to_json()
    assert (info["name"], info["use"], info["origin"], info["available"]) == (
        "mine",
        "acp",
        "configured",
        True,
    )
    assert info["location"] == str(agent) and os.path.isabs(info["location"])


THREE_PHASES = """
phase('Plan')
const plan = await agent('plan it', { label: 'plan' })
phase('Build')
const built = await agent('build it', { label: 'build' })
phase('Review')
const review = await agent('review it', { label: 'review' })
return [plan, built, review]
"""


def test_each_agent_started_event_names_the_provider_its_rule_chose(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    from helpers import run_source

    user_file(
        tmp_path,
        'default = "planner"\n[[rules]]\nphase = "Build"\nprovider = "builder"\n'
        '[[rules]]\nphase = "Review"\nprovider = "beta"\n'
        '[providers.planner]\nuse = "alpha"\n[providers.builder]\nuse = "alpha"\n',
    )
    outcome = run_source(THREE_PHASES, provider=build_router(cwd=str(tmp_path), environ=home))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == ["alpha:None:plan it", "alpha:None:build it", "beta:None:review it"]
    started = [(e.payload["label"], e.payload["provider"]) for e in outcome.of("agent.started")]
    assert started == [("plan", "planner"), ("build", "builder"), ("review", "beta")]


def test_a_provider_used_without_routing_is_named_by_its_own_name() -> None:
    from helpers import run_source

    outcome = run_source("return await agent('x', { label: 'one' })")
    assert [e.payload["provider"] for e in outcome.of("agent.started")] == ["fake"]


def test_a_cost_preview_routes_to_named_providers_by_what_they_use(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    from workflow_mcp.providers.planning import planned_route

    registered["alpha"].capabilities = ProviderCapabilities(structured_output=False)
    user_file(tmp_path, TWO_NAMED + '[providers.ghost]\nuse = "nosuch"\n')
    route = planned_route(load_config(tmp_path, home), None)
    review = route(AgentRequest(prompt="", label="r", phase="Review", model="opus"))
    assert (review.provider, review.model, review.problem) == ("reviewer", "alpha-large", None)
    shaped = route(AgentRequest(prompt="", label="r", phase="Build", schema={"type": "object"}))
    assert shaped.provider == "writer" and shaped.problem is not None
    assert "cannot produce it" in shaped.problem
    forced = planned_route(load_config(tmp_path, home), "ghost")(AgentRequest(prompt="", label="x"))
    assert forced.problem == "provider 'ghost' is not installed here"


def test_the_matrix_shows_the_capabilities_a_configured_providers_settings_declare(
    tmp_path: Path, home: dict[str, str], registered: dict[str, EchoFactory]
) -> None:
    path = user_file(
        tmp_path,
        '[providers.seeing]\nuse = "alpha"\nimages = true\n[providers.broken]\nuse = "alpha"\nbogus = 1\n',
    )
    conf = load_config(tmp_path, home)
    seeing = probe_named(resolve_provider("seeing", conf), built=True, source=conf.where)
    assert seeing.capabilities.images is True and registered["alpha"].built[-1].closed
    assert probe_named(resolve_provider("seeing", conf)).capabilities.images is False  # declared only
    broken = probe_named(resolve_provider("broken", conf), built=True, source=conf.where).availability
    assert broken.available is False
    assert broken.problem == f"{path}: providers.broken.bogus: unknown setting"
