"""Provider configuration, policy, the registry and routing, driven through their public functions
with in-memory providers registered the way a third party would (no agent program needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.providers.base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    CancelSignal,
    ProviderCapabilities,
    ProviderEvent,
)
from workflow_mcp.providers.config import ProviderConfig, ProviderConfigError, find_config, load_config
from workflow_mcp.providers.policy import DEFAULT_POLICY, Policy, PolicyError, allowed_env
from workflow_mcp.providers.registry import (
    Availability,
    ProviderStartError,
    ProviderUnavailableError,
    UnknownProviderError,
    available,
    discover,
    get_provider,
    provider_names,
    register_provider,
    unregister_provider,
)
from workflow_mcp.providers.routing import (
    CapabilityError,
    ModelAliasError,
    NoProviderAvailableError,
    RoutingProvider,
    build_router,
)


class Echo:
    """A provider answering ``<name>:<model>:<prompt>``; ``fail`` makes it a provider failure."""

    def __init__(
        self, name: str, *, structured: bool = True, fail: bool = False, policy: Policy = DEFAULT_POLICY
    ) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(structured_output=structured, streaming=True)
        self.fail = fail
        self.policy = policy
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
    """A third-party style factory with capability attributes and a probe."""

    def __init__(
        self,
        name: str,
        *,
        available: bool = True,
        ready: bool = True,
        structured: bool = True,
        claude: bool = False,
    ) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(structured_output=structured, streaming=True)
        self.accepts_claude_models = claude
        self.available = available
        self.ready = ready
        self.built: list[Echo] = []

    def probe(self, settings: Any) -> Availability:
        if not self.available:
            return Availability(False, problem="not installed", install=f"pip install {self.name}")
        return Availability(
            True,
            version="1.0",
            logged_in=None if self.ready else False,
            problem=None if self.ready else "log in",
        )

    def create(self, settings: Any, *, policy: Policy, source: str) -> Echo:
        unknown = set(settings) - {"fail"}
        if unknown:
            raise ProviderConfigError(
                source, f"providers.{self.name}.{sorted(unknown)[0]}", "unknown setting"
            )
        built = Echo(
            self.name,
            structured=self.capabilities.structured_output,
            fail=bool(settings.get("fail")),
            policy=policy,
        )
        self.built.append(built)
        return built


@pytest.fixture
def registered() -> Iterator[dict[str, EchoFactory]]:
    factories = {
        "alpha": EchoFactory("alpha"),
        "beta": EchoFactory("beta"),
        "plain": EchoFactory("plain", structured=False),
        "claudish": EchoFactory("claudish", claude=True),
        "absent": EchoFactory("absent", available=False),
    }
    for name, factory in factories.items():
        register_provider(name, factory)
    yield factories
    for name in factories:
        unregister_provider(name)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def env(tmp: Path) -> dict[str, str]:
    return {"WORKFLOW_MCP_HOME": str(tmp / "state"), "HOME": str(tmp / "home")}


async def ask(router: RoutingProvider, **fields: Any) -> tuple[AgentResult, list[ProviderEvent]]:
    events: list[ProviderEvent] = []

    async def emit(event: ProviderEvent) -> None:
        events.append(event)

    request = AgentRequest(**{"prompt": "p", "label": "l", **fields})
    return await router.execute(request, AgentContext(signal=CancelSignal(), emit=emit)), events


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


# -- registry ---------------------------------------------------------------------------------


def test_our_providers_are_registered_through_the_entry_point_group() -> None:
    assert {"fake", "codex"} <= set(provider_names())
    info = available("fake")
    assert info.target == "workflow_mcp.providers.registry:FakeFactory"
    assert info.availability.available and info.capabilities.structured_output


def test_an_unknown_provider_name_lists_the_registered_ones(registered: dict[str, EchoFactory]) -> None:
    with pytest.raises(UnknownProviderError, match=r"registered providers: .*alpha"):
        get_provider("nope")


def test_an_unavailable_provider_says_how_to_install_it(registered: dict[str, EchoFactory]) -> None:
    with pytest.raises(ProviderUnavailableError, match="pip install absent"):
        get_provider("absent")


def test_discovery_reports_availability_and_capabilities_without_secrets(
    registered: dict[str, EchoFactory],
) -> None:
    found = {i.name: i.to_json() for i in discover()}
    assert found["absent"]["available"] is False and found["absent"]["install"] == "pip install absent"
    assert found["plain"]["capabilities"]["structuredOutput"] is False
    assert found["alpha"]["ready"] is True


def test_a_plain_callable_registers_as_a_provider_factory() -> None:
    register_provider("callable", lambda **settings: Echo("callable"))
    try:
        assert get_provider("callable").name == "callable"
    finally:
        unregister_provider("callable")


def test_the_fake_factory_takes_a_script_file_or_an_inline_script(tmp_path: Path) -> None:
    script = write(tmp_path / "s.json", '{"default": {"text": "scripted"}}')
    provider = get_provider("fake", {"script": str(script)})
    assert provider.name == "fake"
    with pytest.raises(ProviderConfigError, match=r"providers\.fake\.bogus"):
        get_provider("fake", {"bogus": 1}, source="cfg.toml")


# -- configuration -----------------------------------------------------------------------------


def test_the_nearest_project_file_wins_over_the_user_file(tmp_path: Path) -> None:
    write(tmp_path / "state" / "config.toml", 'default = "beta"\n')
    project = write(tmp_path / "repo" / "workflow-mcp.toml", 'default = "alpha"\n')
    nested = tmp_path / "repo" / "a" / "b"
    nested.mkdir(parents=True)
    assert find_config(nested, env(tmp_path)) == project
    assert load_config(nested, env(tmp_path)).default == "alpha"
    assert load_config(tmp_path, env(tmp_path)).default == "beta"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("default = [", ""),
        ("bogus = 1", "bogus"),
        ('default = "has space"', "default"),
        ('[[rules]]\nlabel = "x"', "rules[0].provider"),
        ('[[rules]]\nprovider = "alpha"', "rules[0]"),
        ('[[rules]]\nprovider = "alpha"\nlabels = "x"', "rules[0].labels"),
        ('fallback = "beta"', "fallback"),
        ("[providers.alpha.models]\nsonnet = 3", "providers.alpha.models.sonnet"),
        ('[policy]\nsandbox = "everything"', "policy.sandbox"),
        ("[policy]\nnetwork = true", "policy.network"),
    ],
)
def test_bad_configuration_names_the_file_and_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path / "workflow-mcp.toml", text)
    with pytest.raises(ProviderConfigError) as caught:
        load_config(tmp_path, env(tmp_path))
    assert caught.value.path == str(path)
    assert caught.value.key == key
    assert str(caught.value).startswith(str(path))


def test_a_project_file_can_narrow_but_not_widen_the_user_policy(tmp_path: Path) -> None:
    write(tmp_path / "state" / "config.toml", '[policy]\nnetwork = true\nsandbox = "workspace-write"\n')
    write(tmp_path / "repo" / "workflow-mcp.toml", '[policy]\nsandbox = "read-only"\n')
    conf = load_config(tmp_path / "repo", env(tmp_path))
    assert conf.policy.sandbox == "read-only" and conf.policy.network is True
    write(tmp_path / "repo" / "workflow-mcp.toml", '[policy]\nsandbox = "danger-full-access"\n')
    with pytest.raises(ProviderConfigError, match="can only narrow the user policy"):
        load_config(tmp_path / "repo", env(tmp_path))


# -- policy ------------------------------------------------------------------------------------


def test_the_default_policy_is_workspace_write_without_network_or_approvals() -> None:
    assert DEFAULT_POLICY.to_mapping() == {
        "sandbox": "workspace-write",
        "network": False,
        "writable_roots": [],
        "approvals": "never",
        "env": [],
    }


def test_a_caller_can_narrow_the_policy() -> None:
    server = Policy(sandbox="workspace-write", network=True, writable_roots=("/data",), env=("TOKEN",))
    narrowed = server.narrow(
        {"sandbox": "read-only", "network": False, "writable_roots": ["/data/sub"], "env": []}
    )
    assert (narrowed.sandbox, narrowed.network, narrowed.writable_roots, narrowed.env) == (
        "read-only",
        False,
        ("/data/sub",),
        (),
    )
    assert server.narrow(None) is server


@pytest.mark.parametrize(
    ("asked", "key"),
    [
        ({"sandbox": "danger-full-access"}, "sandbox"),
        ({"network": True}, "network"),
        ({"writable_roots": ["/etc"]}, "writable_roots"),
        ({"approvals": "auto-review"}, "approvals"),
        ({"env": ["AWS_SECRET_ACCESS_KEY"]}, "env"),
    ],
)
def test_a_caller_can_never_widen_the_policy(asked: dict[str, Any], key: str) -> None:
    with pytest.raises(PolicyError) as caught:
        DEFAULT_POLICY.narrow(asked)
    assert caught.value.key == key


def test_provider_processes_get_only_allowlisted_environment_names() -> None:
    environ = {
        "PATH": "/bin",
        "LC_ALL": "C",
        "OPENAI_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "MOCK_KEY": "m",
    }
    seen = allowed_env(Policy(env=("MOCK_*",)), ("OPENAI_API_KEY",), environ)
    assert seen == {"PATH": "/bin", "LC_ALL": "C", "OPENAI_API_KEY": "k", "MOCK_KEY": "m"}


# -- routing -----------------------------------------------------------------------------------


def config(**fields: Any) -> ProviderConfig:
    return ProviderConfig(path="/cfg/workflow-mcp.toml", **fields)


def rules(*raw: dict[str, Any]) -> Any:
    from workflow_mcp.providers.config import parse_config

    return parse_config({"default": "alpha", "rules": list(raw)}, "/cfg/workflow-mcp.toml").rules


def test_the_first_matching_rule_routes_a_call_and_the_default_takes_the_rest(
    registered: dict[str, EchoFactory],
) -> None:
    router = build_router(
        config=config(
            default="alpha",
            rules=rules(
                {"label": "sec-*", "provider": "beta"},
                {"phase": "Review", "agentType": "critic", "provider": "claudish"},
                {"label": "sec-*", "provider": "plain"},
            ),
        )
    )
    assert run(ask(router, label="sec-1"))[0].text == "beta:None:p"
    assert run(ask(router, label="x", phase="Review", agent_type="critic"))[0].text == "claudish:None:p"
    assert run(ask(router, label="x", phase="Review"))[0].text == "alpha:None:p"


def test_forcing_a_provider_overrides_rules_and_default(registered: dict[str, EchoFactory]) -> None:
    router = build_router(
        provider="beta", config=config(default="alpha", rules=rules({"label": "*", "provider": "claudish"}))
    )
    assert router.name == "beta"
    assert run(ask(router, label="anything"))[0].text == "beta:None:p"


def test_a_schema_call_to_a_provider_without_structured_output_is_refused_before_it_is_called(
    registered: dict[str, EchoFactory],
) -> None:
    router = build_router(provider="plain", config=config())
    with pytest.raises(CapabilityError, match="has no structured output capability") as caught:
        run(ask(router, schema={"type": "object"}))
    assert registered["plain"].built[0].calls == []
    # It names a provider that has the capability and is ready here (never an unavailable one).
    assert "e.g. 'alpha'" in str(caught.value)


def test_a_capability_refusal_names_a_configured_provider_that_has_it_first(
    registered: dict[str, EchoFactory],
) -> None:
    router = build_router(config=config(default="plain", rules=rules({"label": "s*", "provider": "beta"})))
    with pytest.raises(CapabilityError, match=r"e\.g\. 'beta' \(configured here\)"):
        run(ask(router, label="text", schema={"type": "object"}))


def test_a_claude_alias_maps_only_through_configuration(registered: dict[str, EchoFactory]) -> None:
    mapped = build_router(provider="alpha", config=config(models={"alpha": {"sonnet": "alpha-large"}}))
    assert run(ask(mapped, model="sonnet"))[0].text == "alpha:alpha-large:p"
    unmapped = build_router(provider="alpha", config=config())
    with pytest.raises(ModelAliasError, match=r"/cfg/workflow-mcp.toml under \[providers.alpha.models\]"):
        run(ask(unmapped, model="opus"))
    claude_like = build_router(provider="claudish", config=config())
    assert run(ask(claude_like, model="opus"))[0].text == "claudish:opus:p"
    assert run(ask(unmapped, model="gpt-x"))[0].text == "alpha:gpt-x:p"


def test_a_rule_routing_an_unmapped_claude_alias_is_a_configuration_error(
    registered: dict[str, EchoFactory],
) -> None:
    with pytest.raises(ProviderConfigError, match=r"rules\[0\].model"):
        build_router(config=config(default="beta", rules=rules({"model": "haiku", "provider": "alpha"})))


def test_a_provider_failure_falls_back_in_order_and_reports_it(registered: dict[str, EchoFactory]) -> None:
    router = build_router(
        config=config(default="alpha", fallback=("plain", "beta"), settings={"alpha": {"fail": True}})
    )
    result, events = run(ask(router))
    assert result.text == "plain:None:p"
    assert "falling back to plain" in events[0].text
    schema_result, schema_events = run(ask(router, schema={"type": "object"}))
    assert schema_result.text == "beta:None:p"  # plain cannot do schemas: passed over
    assert any("plain skipped" in e.text for e in schema_events)


def test_a_provider_that_cannot_start_falls_back_and_without_a_fallback_rejects_the_call(
    registered: dict[str, EchoFactory],
) -> None:
    class Broken(Echo):
        async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
            raise ProviderStartError("broken: binary vanished")

    register_provider("broken", lambda **s: Broken("broken"))
    try:
        with_fallback = build_router(config=config(default="broken", fallback=("alpha",)))
        result, events = run(ask(with_fallback))
        assert result.text == "alpha:None:p" and "binary vanished" in events[0].text
        alone = build_router(config=config(default="broken"))
        with pytest.raises(AgentExecutionError, match="binary vanished"):
            run(ask(alone))
    finally:
        unregister_provider("broken")


def test_when_every_provider_fails_the_last_failure_is_the_answer(registered: dict[str, EchoFactory]) -> None:
    router = build_router(
        config=config(
            default="alpha", fallback=("beta",), settings={"alpha": {"fail": True}, "beta": {"fail": True}}
        )
    )
    result, _ = run(ask(router))
    assert result.outcome == "provider_failed" and result.message == "beta is down"


def test_an_execution_error_never_falls_back(registered: dict[str, EchoFactory]) -> None:
    class Boom(Echo):
        async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
            raise AgentExecutionError("boom")

    register_provider("boom", lambda **s: Boom("boom"))
    try:
        router = build_router(config=config(default="boom", fallback=("alpha",)))
        with pytest.raises(AgentExecutionError, match="boom"):
            run(ask(router))
        assert registered["alpha"].built[0].calls == []
    finally:
        unregister_provider("boom")


@pytest.mark.parametrize(
    ("conf", "error", "needle"),
    [
        (
            {"default": "nope"},
            UnknownProviderError,
            "/cfg/workflow-mcp.toml: default: unknown provider 'nope'",
        ),
        ({"default": "alpha", "fallback": ("ghost",)}, UnknownProviderError, "fallback[0]"),
        (
            {"default": "absent"},
            ProviderUnavailableError,
            "/cfg/workflow-mcp.toml: default: provider 'absent'",
        ),
        (
            {"default": "alpha", "settings": {"alpha": {"colour": 1}}},
            ProviderConfigError,
            "providers.alpha.colour",
        ),
        ({"default": "alpha", "settings": {"ghost": {}}}, UnknownProviderError, "providers.ghost"),
    ],
)
def test_bad_routing_configuration_fails_before_any_agent_runs(
    registered: dict[str, EchoFactory], conf: dict[str, Any], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error) as caught:
        build_router(config=config(**conf))
    assert needle in str(caught.value)


def test_without_configuration_the_first_ready_provider_is_picked_and_announced(
    registered: dict[str, EchoFactory], monkeypatch: pytest.MonkeyPatch
) -> None:
    import workflow_mcp.providers.routing as routing

    monkeypatch.setattr(routing, "AUTO_PICK_ORDER", ("absent", "beta", "alpha"))
    notices: list[str] = []
    router = build_router(config=ProviderConfig(), on_pick=notices.append)
    assert router.default == "beta"
    assert "using beta 1.0" in notices[0]


def test_with_nothing_ready_the_error_explains_how_to_install_one(
    registered: dict[str, EchoFactory], monkeypatch: pytest.MonkeyPatch
) -> None:
    import workflow_mcp.providers.routing as routing

    registered["beta"].ready = False
    monkeypatch.setattr(routing, "AUTO_PICK_ORDER", ("absent", "beta", "missing"))
    with pytest.raises(NoProviderAvailableError) as caught:
        build_router(config=ProviderConfig())
    text = str(caught.value)
    assert "absent: not installed (install: pip install absent)" in text
    assert "beta: log in" in text and "missing: not installed" in text
    assert "--provider fake" in text


def test_the_effective_policy_is_the_configured_one_narrowed_by_the_caller(
    registered: dict[str, EchoFactory],
) -> None:
    router = build_router(
        provider="alpha", config=config(policy=Policy(network=True)), policy={"sandbox": "read-only"}
    )
    built = registered["alpha"].built[-1]
    assert built.policy.sandbox == "read-only" and built.policy.network is True
    with pytest.raises(PolicyError):
        build_router(provider="alpha", config=config(), policy={"network": True})
    assert router.capabilities.streaming


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[providers.acp]\ncommand = "/tmp/evil"', "providers.acp.command"),
        ('[providers.codex]\nbin = "/tmp/evil"', "providers.codex.bin"),
        ('[providers.acp]\nset_env = { LD_PRELOAD = "/tmp/x.so" }', "providers.acp.set_env"),
        ('[providers.openai]\nbase_url = "https://collector.example/v1"', "providers.openai.base_url"),
    ],
)
def test_a_repository_file_may_not_choose_programs_environments_or_endpoints(
    tmp_path: Path, table: str, key: str
) -> None:
    write(tmp_path / "repo" / "workflow-mcp.toml", table + "\n")
    with pytest.raises(ProviderConfigError, match="only in the user") as caught:
        load_config(tmp_path / "repo", env(tmp_path))
    assert caught.value.key == key
    write(tmp_path / "state" / "config.toml", table + "\n")  # the user's own file may
    load_config(tmp_path, env(tmp_path))
