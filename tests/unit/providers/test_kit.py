"""The provider kit: one settings check, one effort mapping, one failure translation, one parser
of structured answers, and token sums, shared by every provider."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from workflow_mcp.providers._kit import (
    FailureTable,
    ProviderBase,
    ask_again,
    at_least,
    check_settings,
    configured_program,
    failure_outcome,
    load_sdk,
    map_effort,
    more_than,
    one_of,
    probe_program,
    program_version,
    ready,
    upstream_message,
)
from workflow_mcp.providers.base import (
    AgentContext,
    AgentExecutionError,
    CancelSignal,
    ProviderAuthError,
    ProviderEvent,
    ProviderUsageLimitError,
    TokenUsage,
)
from workflow_mcp.providers.config import ProviderConfigError
from workflow_mcp.providers.policy import DEFAULT_POLICY
from workflow_mcp.providers.registry import Availability, ProviderStartError
from workflow_mcp.providers.schema import parse_answer


@dataclass(frozen=True)
class Sample:
    name: str | None = None
    flag: bool = False
    count: int = field(default=1, metadata=at_least(1))
    timeout_s: float = field(default=1.0, metadata=more_than(0))
    mode: str = field(default="a", metadata=one_of(("a", "b")))
    names: list[str] = field(default_factory=list)
    table: dict[str, str] = field(default_factory=dict, metadata=one_of(("x", "y")))
    anything: dict[str, Any] = field(default_factory=dict)
    either: dict[str, str | bool] = field(default_factory=dict)


def problem(settings: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ProviderConfigError) as caught:
        check_settings(Sample, settings, provider="sample", source="/p/workflow-mcp.toml")
    assert caught.value.path == "/p/workflow-mcp.toml"
    return caught.value.key, caught.value.problem


@pytest.mark.parametrize(
    ("settings", "key", "words"),
    [
        ({"colour": 1}, "providers.sample.colour", "unknown setting; expected one of name, flag"),
        ({"name": 5}, "providers.sample.name", "must be a string"),
        ({"flag": 1}, "providers.sample.flag", "must be a boolean (true or false)"),
        ({"flag": "true"}, "providers.sample.flag", "must be a boolean"),
        ({"count": True}, "providers.sample.count", "must be an integer"),
        ({"count": 1.5}, "providers.sample.count", "must be an integer"),
        ({"count": 0}, "providers.sample.count", "must be at least 1, got 0"),
        ({"timeout_s": False}, "providers.sample.timeout_s", "must be a number"),
        ({"timeout_s": 0}, "providers.sample.timeout_s", "must be more than 0, got 0"),
        ({"mode": "c"}, "providers.sample.mode", "must be one of a, b, got 'c'"),
        ({"names": "a"}, "providers.sample.names", "must be a list of non-empty strings"),
        ({"names": ["a", ""]}, "providers.sample.names", "must be a list of non-empty strings"),
        ({"names": ["a", 2]}, "providers.sample.names", "must be a list of non-empty strings"),
        ({"table": []}, "providers.sample.table", "must be a table"),
        ({"table": {"k": 1}}, "providers.sample.table.k", "must be a string"),
        ({"table": {"k": "z"}}, "providers.sample.table.k", "must be one of x, y, got 'z'"),
        ({"either": {"k": 3}}, "providers.sample.either.k", "must be string or boolean"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_file_the_key_and_the_rule(
    settings: dict[str, Any], key: str, words: str
) -> None:
    found_key, found = problem(settings)
    assert found_key == key and found.startswith(words)


def test_good_settings_of_every_kind_pass_and_a_boolean_is_only_a_boolean() -> None:
    check_settings(
        Sample,
        {
            "name": None,  # a keyword left unset
            "flag": True,
            "count": 3,
            "timeout_s": 2,  # an integer is a number
            "mode": "b",
            "names": ("a", "b"),  # a constructor's tuple is a list
            "table": {"k": "x"},
            "anything": {"k": [1, {"deep": None}]},
            "either": {"a": "s", "b": False},
        },
        provider="sample",
        source="cfg",
    )


def test_an_effort_maps_through_the_table_else_itself_when_known_else_the_default() -> None:
    table = {"max": "high"}
    known = ("low", "high")
    assert map_effort("max", table=table, known=known, default="low") == "high"
    assert map_effort("high", table=table, known=known, default="low") == "high"
    assert map_effort("ludicrous", table=table, known=known, default="low") == "low"
    assert map_effort(None, table=table, known=known, default=None) is None


TABLE = FailureTable(
    "vendor",
    kinds={"quota": "usage_limit", "slow": "overloaded", "login": "auth"},
    statuses={401: "auth", 429: "rate_limit"},
)


@pytest.mark.parametrize(
    ("kinds", "status", "expected"),
    [
        (("quota",), None, "usage_limit"),
        ((None, "slow"), 500, "overloaded"),  # the first known kind wins over the status
        (("unknown",), 429, "rate_limit"),
        (("unknown",), 502, "api"),  # any 5xx is an API failure
        (("unknown",), 400, "execution"),
        ((), None, "execution"),
        (("slow",), 401, "auth"),  # a login problem wins over everything
        (("slow", "login"), None, "auth"),
    ],
)
def test_a_vendor_failure_is_translated_once_by_its_table(
    kinds: tuple[str | None, ...], status: int | None, expected: str
) -> None:
    assert TABLE.kind(*kinds, status=status) == expected


def test_each_failure_kind_has_one_outcome() -> None:
    with pytest.raises(ProviderAuthError) as auth:
        failure_outcome("auth", backend="v", detail="expired", login_hint="v login")
    assert auth.value.to_json()["loginHint"] == "v login"
    with pytest.raises(ProviderUsageLimitError) as limit:
        failure_outcome("usage_limit", backend="v", detail="spent", resets_at="2026-01-01T00:00:00Z")
    assert limit.value.resets_at == "2026-01-01T00:00:00Z"
    with pytest.raises(AgentExecutionError, match=r"^v: bad request$"):
        failure_outcome("execution", backend="v", detail="bad request")
    usage = TokenUsage(input=1, output=2)
    load = failure_outcome("rate_limit", backend="v", detail="slow down", usage=usage, retry_after_s=2.0)
    assert (load.outcome, load.failure, load.retry_after_s, load.usage) == (
        "provider_failed",
        "rate_limit",
        2.0,
        usage,
    )
    api = failure_outcome("api", backend="v", detail="502", session="s1")
    assert (api.outcome, api.failure, api.message, api.session) == ("provider_failed", None, "502", "s1")


def test_an_upstream_json_error_body_is_reduced_to_its_message() -> None:
    assert upstream_message('{"error": {"message": "model overloaded", "code": 529}}') == "model overloaded"
    assert upstream_message('{"error": "flat"}') == '{"error": "flat"}'
    assert upstream_message("plain words") == "plain words"
    assert upstream_message("[1, 2]") == "[1, 2]"


def test_a_configured_program_must_be_an_executable_file(tmp_path: Any) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/bin/sh\n")
    assert configured_program(str(script)) == (None, f"bin {str(script)!r} is not an executable file")
    script.chmod(0o755)
    assert configured_program(str(script)) == (str(script), None)


def test_token_usage_adds_field_by_field() -> None:
    total = TokenUsage(1, 2, 3, 4) + TokenUsage(10, 20, 30, 40)
    assert total == TokenUsage(input=11, output=22, cache_read=33, cache_write=44)
    assert sum((TokenUsage(output=n) for n in (1, 2, 3)), TokenUsage()) == TokenUsage(output=6)


def test_a_token_usage_sum_with_no_tokens_on_one_side_is_the_other_value() -> None:
    spent, none = TokenUsage(1, 2, 3, 4), TokenUsage()
    assert spent + none is spent and none + spent is spent and none + TokenUsage() == TokenUsage()
    for only in (TokenUsage(input=1), TokenUsage(cache_read=1), TokenUsage(cache_write=1)):
        assert (
            only + spent
            == spent + only
            == TokenUsage(
                spent.input + only.input,
                spent.output + only.output,
                spent.cache_read + only.cache_read,
                spent.cache_write + only.cache_write,
            )
        )


# -- structured answers -----------------------------------------------------------------------------

FENCE = "```"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": 1}\n ', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ("3", 3),
        ('"a string"', "a string"),
        # A JSON string that holds a fence is the whole answer, not the fence inside it.
        (f'"see {FENCE}json\\n[1]\\n{FENCE}"', f"see {FENCE}json\n[1]\n{FENCE}"),
        (f'{FENCE}json\n{{"a": 1}}\n{FENCE}', {"a": 1}),
        (f'{FENCE}JSON\n{{"a": 1}}\n{FENCE}', {"a": 1}),
        (f'{FENCE}\n{{"a": 1}}\n{FENCE}', {"a": 1}),
        (f'{FENCE}jsonc \r\n{{"a": 1}}\r\n{FENCE}', {"a": 1}),
        (f'Here it is:\n{FENCE}json\n{{"a": 1}}\n{FENCE}\nDone.', {"a": 1}),
        (f"Draft:\n{FENCE}json\n[1]\n{FENCE}\nFinal:\n{FENCE}json\n[2]\n{FENCE}", [2]),
        (f"{FENCE}json\n[1]\n{FENCE}\n{FENCE}python\nprint(2)\n{FENCE}", [1]),
    ],
)
def test_a_structured_answer_is_the_whole_reply_else_its_last_json_fence(text: str, value: Any) -> None:
    assert parse_answer(text) == (True, value, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the reply is empty"),
        ("  \n ", "the reply is empty"),
        ("Sure! The answer is 4.", "not JSON: "),
        (f"{FENCE}python\nprint(1)\n{FENCE}", "not JSON: "),
        (f"{FENCE}json\n{{oops}}\n{FENCE}", "the fenced block is not JSON: "),
        (f"{FENCE}json\n[1]\n{FENCE}\n{FENCE}json\nnot json\n{FENCE}", "the fenced block is not JSON: "),
    ],
)
def test_a_reply_without_a_json_value_says_why(text: str, problem: str) -> None:
    ok, value, found = parse_answer(text)
    assert (ok, value) == (False, None) and found is not None and found.startswith(problem)


# -- the skeleton -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinySettings:
    model: str | None = None
    retries: int = field(default=1, metadata=at_least(0))


class Tiny(ProviderBase[TinySettings]):
    name = "tiny"
    settings_type = TinySettings
    install_hint = "pip install tiny"

    async def aclose(self) -> None:
        self._closed = True

    @classmethod
    def check_more(cls, settings: Mapping[str, Any], source: str) -> None:
        if not settings.get("model"):
            raise ProviderConfigError(source, "providers.tiny.model", "is required")


def test_create_checks_the_table_against_the_settings_dataclass_then_the_providers_own_rule() -> None:
    built = Tiny.create({"model": "m", "retries": 3}, policy=DEFAULT_POLICY, source="cfg")
    assert (built.settings, built.source) == (TinySettings(model="m", retries=3), "cfg")
    with pytest.raises(
        ProviderConfigError, match=r"^cfg: providers.tiny.retries: must be at least 0, got -1$"
    ):
        Tiny.create({"model": "m", "retries": -1}, policy=DEFAULT_POLICY, source="cfg")
    with pytest.raises(ProviderConfigError, match=r"^cfg: providers.tiny.model: is required$"):
        Tiny.create({}, policy=DEFAULT_POLICY, source="cfg")


def test_a_provider_built_directly_from_its_settings_is_held_to_the_same_rules() -> None:
    assert Tiny(TinySettings(model="m")).settings.retries == 1
    with pytest.raises(
        ProviderConfigError, match=r"^code: providers.tiny.retries: must be at least 0, got -5$"
    ):
        Tiny(TinySettings(model="m", retries=-5), source="code")
    with pytest.raises(ProviderConfigError, match=r"^code: providers.tiny.model: is required$"):
        Tiny(source="code")


def test_a_call_begins_only_while_its_signal_is_quiet_and_the_provider_open() -> None:
    async def emit(event: ProviderEvent) -> None:
        pass

    provider = Tiny.create({"model": "m"}, policy=DEFAULT_POLICY, source="cfg")
    quiet = AgentContext(signal=CancelSignal(), emit=emit)
    provider.begin(quiet)  # nothing to refuse
    fired = CancelSignal()
    fired.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        provider.begin(AgentContext(signal=fired, emit=emit))
    asyncio.run(provider.aclose())
    with pytest.raises(AgentExecutionError, match=r"^the tiny provider is closed; build a new one"):
        provider.begin(quiet)


def test_a_missing_sdk_is_a_start_error_naming_the_package_and_the_install_command() -> None:
    assert load_sdk("json", package="json", install="-") is json
    with pytest.raises(ProviderStartError) as caught:
        load_sdk("workflow_mcp_no_such_sdk", package="no-such-sdk", install="pip install 'workflow-mcp[x]'")
    assert str(caught.value).startswith("the no-such-sdk SDK does not import (No module named")
    assert str(caught.value).endswith("install it with pip install 'workflow-mcp[x]'")


def test_a_reply_without_json_is_asked_again_until_the_retries_are_spent_each_ask_a_progress_event() -> None:
    events: list[ProviderEvent] = []

    async def emit(event: ProviderEvent) -> None:
        events.append(event)

    async def asks(retries: int) -> list[bool]:
        context = AgentContext(signal=CancelSignal(), emit=emit)
        return [
            await ask_again(context, backend="b", problem="not JSON", asks=n, retries=retries)
            for n in range(3)
        ]

    assert asyncio.run(asks(2)) == [True, True, False]
    assert [(e.kind, e.text, dict(e.data)) for e in events] == [
        ("progress", "b replied without JSON (not JSON); asking again (1 of 2)", {"reask": 1}),
        ("progress", "b replied without JSON (not JSON); asking again (2 of 2)", {"reask": 2}),
    ]
    events.clear()
    assert asyncio.run(asks(0)) == [False, False, False] and events == []


def test_ready_reports_an_installed_provider_with_the_login_it_seems_to_have() -> None:
    found = ready(
        version="1.2", location="/bin/x", login=(False, None, "run `x login`"), install="pip install x"
    )
    assert (found.available, found.version, found.location) == (True, "1.2", "/bin/x")
    assert (found.logged_in, found.login, found.problem, found.install) == (
        False,
        None,
        "run `x login`",
        "pip install x",
    )


def test_a_bin_setting_is_probed_for_its_version_or_reported_unavailable(tmp_path: Any) -> None:
    program = tmp_path / "tool"
    program.write_text('#!/bin/sh\necho "2.0 tool 1.2.3"\n')
    missing = probe_program(str(program))
    assert isinstance(missing, Availability) and not missing.available
    assert (missing.location, missing.problem) == (
        str(program),
        f"bin {str(program)!r} is not an executable file",
    )
    program.chmod(0o755)
    assert probe_program(str(program)) == (str(program), "1.2.3")
    assert probe_program(str(program), "first") == (str(program), "2.0")


@pytest.mark.parametrize(
    ("reply", "status"),
    [("agent says: hello", 0), ("tool", 0), ("", 0), ("tool 1.2.3", 1)],
)
def test_a_version_reply_without_a_digit_or_with_a_failure_status_is_no_version(
    tmp_path: Any, reply: str, status: int
) -> None:
    program = tmp_path / "tool"
    program.write_text(f'#!/bin/sh\necho "{reply}"\nexit {status}\n')
    program.chmod(0o755)
    assert program_version(str(program)) is None


def test_a_programs_version_is_asked_once_until_the_program_changes(tmp_path: Any) -> None:
    log = tmp_path / "asked"
    program = tmp_path / "tool"
    program.write_text(f'#!/bin/sh\necho x >> "{log}"\necho "tool 1.2.3"\n')
    program.chmod(0o755)
    assert [program_version(str(program)) for _ in range(3)] == ["1.2.3"] * 3
    assert log.read_text() == "x\n"
    program.write_text(f'#!/bin/sh\necho x >> "{log}"\necho "tool 1.2.40"\n')  # replaced: asked again
    assert program_version(str(program)) == "1.2.40"
    assert log.read_text() == "x\nx\n"
