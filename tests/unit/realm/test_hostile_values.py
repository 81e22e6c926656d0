"""Hostile values from workflow code: getters and proxies thrown at the host, a forged
``Object.prototype.toJSON``, a body that closes its function early, floods of log lines and forged
worker messages. Each runs as a real workflow in the real Node worker (or, for the message checks,
against the host's own parser).

The rule under test (README, Security): host code reads a value workflow code made only through its
own data properties and only inside the synchronous time limit, so nothing a workflow throws, returns
or defines can hang the worker, rewrite a protocol message or run outside the strict function the
body is compiled into.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from workflow_mcp.definitions import profile as profiles
from workflow_mcp.definitions.profile import get_profile
from workflow_mcp.errors import WorkflowLoadError
from workflow_mcp.providers import FakeProvider
from workflow_mcp.realm.messages import check_worker_message

from helpers import logs, run_source, workflow

# Every case runs twice: with the bare worker, and with the worker inside bubblewrap.
pytestmark = pytest.mark.usefixtures("realm_sandbox")

SPIN = "{ for (;;) {} }"

# Each throws a value whose every read spins forever; the run must end at the synchronous limit.
SPINNING_THROWS = {
    "getter-object": f"throw {{ get message() {SPIN}, get name() {SPIN}, get stack() {SPIN} }}",
    "proxy": (
        f"throw new Proxy({{}}, {{ get() {SPIN}, getOwnPropertyDescriptor() {SPIN}, ownKeys() {SPIN},"
        f" getPrototypeOf() {SPIN}, has() {SPIN} }})"
    ),
    "error-with-getters": (
        f"const e = new Error('x'); Object.defineProperty(e, 'message', {{ get() {SPIN} }});"
        f" Object.defineProperty(e, 'name', {{ get() {SPIN} }}); throw e"
    ),
    "after-await": f"await null; throw {{ get message() {SPIN} }}",
    "rejected-agent-chain": f"await agent('x').then(() => {{ throw {{ get message() {SPIN} }} }})",
}


@pytest.mark.parametrize("body", list(SPINNING_THROWS.values()), ids=list(SPINNING_THROWS))
def test_a_thrown_value_that_spins_on_every_read_ends_the_run_at_the_synchronous_limit(body: str) -> None:
    began = time.monotonic()
    outcome = run_source(body, sync_timeout_ms=500, provider=FakeProvider({}), timeout=30)
    took = time.monotonic() - began
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "TimeoutError", outcome.failure
    assert "synchronous time limit" in outcome.failure["message"]
    assert took < 15, f"the run took {took:.1f} s; the limit was 0.5 s"


# Values that do not spin but lie: the host must report them without running their code.
def test_a_thrown_value_whose_conversions_spin_is_reported_without_converting_it() -> None:
    began = time.monotonic()
    outcome = run_source(
        f"throw {{ toString() {SPIN}, valueOf() {SPIN}, [Symbol.toPrimitive]() {SPIN} }}",
        provider=FakeProvider({}),
        timeout=30,
    )
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "Error"  # the host error shape Claude gives a thrown plain object
    assert isinstance(outcome.failure["message"], str)
    assert time.monotonic() - began < 15


def test_a_thrown_value_with_throwing_getters_fails_the_run_with_a_plain_message() -> None:
    outcome = run_source(
        "throw { get message() { throw new Error('nope') }, get name() { throw 1 } }",
        provider=FakeProvider({}),
    )
    assert outcome.status == "failed"
    assert isinstance(outcome.failure["message"], str)
    assert isinstance(outcome.failure["name"], str)


def test_object_prototype_to_json_cannot_be_installed_so_the_workers_messages_stay_intact() -> None:
    # The intrinsics are frozen (as in Claude Code 2.1.332): Object.prototype.toJSON cannot be added,
    # and the messages the realm sends are null-prototype copies anyway.
    body = (
        "let refused\n"
        "try { Object.prototype.toJSON = function () { return { t: 'done', ok: true, value: '\"forged\"' } } }"
        " catch (e) { refused = e.name }\n"
        "const a = await agent('hello', { label: 'real' })\n"
        "return { a, refused, toJSON: typeof Object.prototype.toJSON }"
    )
    outcome = run_source(body, provider=FakeProvider({"default": {"text": "answered"}}))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == {"a": "answered", "refused": "TypeError", "toJSON": "undefined"}
    (completed,) = outcome.of("agent.completed")
    assert completed.payload["label"] == "real"


def test_array_prototype_to_json_and_json_stringify_patches_are_refused_and_messages_stay_intact() -> None:
    body = (
        "const refused = []\n"
        "for (const patch of [() => { Array.prototype.toJSON = function () { return 'x' } },\n"
        "  () => { String.prototype.toJSON = function () { return 'y' } },\n"
        '  () => { JSON.stringify = () => \'{"t":"done","ok":true,"value":"1"}\' }]) {\n'
        "  try { patch(); refused.push('patched') } catch (e) { refused.push(e.name) }\n"
        "}\n"
        "const [a, b] = await parallel([() => agent('one'), () => agent('two')])\n"
        "log('still logging')\n"
        "return [a + ' ' + b, refused]"
    )
    outcome = run_source(body, provider=FakeProvider({"default": {"text": "ok"}}))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == ["ok ok", ["TypeError", "TypeError", "TypeError"]]
    assert logs(outcome.events) == ["still logging"]


# -- the body stays inside its strict function --------------------------------------------------

EARLY_CLOSES = [
    "return 1 }); (async () => {",
    "return 1 })(); globalThis.escaped = 1; (async () => {",
    "})(); var sloppyGlobal = arguments; (async () => {",
]


@pytest.mark.parametrize("body", EARLY_CLOSES)
def test_a_body_that_closes_its_function_early_is_refused_by_the_loader(body: str) -> None:
    with pytest.raises(WorkflowLoadError) as caught:
        workflow(body)
    assert "closes the workflow's body early" in str(caught.value)


def test_the_early_close_is_reported_where_v8_closed_the_function() -> None:
    with pytest.raises(WorkflowLoadError) as caught:
        workflow("const a = 1\nreturn a }); (async () => {")
    assert caught.value.rule == "syntax"
    assert (caught.value.line, caught.value.column) == (3, 10)  # line 1 is the meta line workflow() adds


def test_the_top_level_this_is_the_realms_own_global_and_code_is_strict() -> None:
    body = (
        "const proto = Object.getPrototypeOf(globalThis)\n"
        "let sloppy = true\n"
        "try { undeclared = 1 } catch (e) { sloppy = e instanceof ReferenceError ? false : 'other' }\n"
        "return { same: this === globalThis, realm: proto === null || proto instanceof Object ||"
        " Object.getPrototypeOf(proto) === Object.prototype, strict: !sloppy }"
    )
    outcome = run_source(body)
    assert outcome.result == {"same": True, "realm": True, "strict": True}


def test_a_setter_on_the_global_receives_the_realms_global() -> None:
    # With a contextified sandbox, a setter defined by workflow code on the global saw the host's
    # sandbox object as its receiver when the host set a global; the realm's global is its own object now.
    body = (
        "const seen = []\n"
        "for (const name of ['args', 'budget', 'agent']) {\n"
        "  const d = Object.getOwnPropertyDescriptor(globalThis, name)\n"
        "  if (d && d.configurable) Object.defineProperty(globalThis, name, {\n"
        "    get() { return d.value }, set(v) { seen.push(this === globalThis) }, configurable: true })\n"
        "}\n"
        "await agent('x')\n"
        "return seen.every(Boolean)"
    )
    outcome = run_source(body, provider=FakeProvider({}))
    assert outcome.status == "completed", outcome.error
    assert outcome.result is True


# -- log floods ---------------------------------------------------------------------------------


def test_a_log_flood_is_counted_in_the_worker_and_reported_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = dataclasses.replace(get_profile(), max_log_lines=20)
    monkeypatch.setitem(profiles.PROFILES, profiles.DEFAULT_PROFILE, profile)
    began = time.monotonic()
    outcome = run_source("for (let i = 0; i < 300000; i++) log('line ' + i)\nreturn 'done'", timeout=60)
    took = time.monotonic() - began
    assert outcome.status == "completed", outcome.error
    assert logs(outcome.events) == [f"line {i}" for i in range(20)]
    warnings = [e.payload["message"] for e in outcome.of("warning")]
    assert warnings[-1] == "299,980 log lines of this run were dropped (log limit)"
    assert took < 30, f"{took:.1f} s for a flood the worker should drop"


def test_a_log_flood_by_characters_stops_at_the_character_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = dataclasses.replace(get_profile(), max_log_chars=10_000)
    monkeypatch.setitem(profiles.PROFILES, profiles.DEFAULT_PROFILE, profile)
    outcome = run_source("const s = 'x'.repeat(1000)\nfor (let i = 0; i < 5000; i++) log(s)\nreturn 1")
    assert outcome.status == "completed", outcome.error
    kept = logs(outcome.events)
    assert 0 < len(kept) <= 11
    assert any("log lines of this run were dropped" in e.payload["message"] for e in outcome.of("warning"))


# -- the host checks every worker message's shape -----------------------------------------------

GOOD_AGENT = {
    "t": "call",
    "fn": "agent",
    "id": 1,
    "prompt": "p",
    "opts": {},
    "label": "l",
    "phase": None,
    "child": None,
    "key": "k",
    "canon": "c",
}

FORGED: list[tuple[Any, str]] = [
    ([], "not a JSON object"),
    ({"t": "exec"}, "unknown worker message type 'exec'"),
    ({"t": "call", "fn": "spawn"}, "unknown call 'spawn'"),
    ({**GOOD_AGENT, "id": "1"}, "without a well-formed 'id'"),
    ({**GOOD_AGENT, "id": True}, "without a well-formed 'id'"),
    ({k: v for k, v in GOOD_AGENT.items() if k != "prompt"}, "without a well-formed 'prompt'"),
    ({**GOOD_AGENT, "opts": []}, "without a well-formed 'opts'"),
    ({"t": "call", "fn": "workflow", "id": 2, "target": {}}, "without a name or scriptPath"),
    ({"t": "call", "fn": "workflow", "id": 2, "target": {"name": "x"}, "args": {}}, "args are not JSON text"),
    ({"t": "log", "message": 3, "child": None}, "without a well-formed 'message'"),
    ({"t": "dropped", "lines": "9"}, "without a well-formed 'lines'"),
    ({"t": "done", "ok": "yes"}, "without a well-formed 'ok'"),
    ({"t": "done", "ok": True, "value": 1}, "without its value as JSON text"),
    ({"t": "done", "ok": False, "error": "boom"}, "without a well-formed error"),
    ({"t": "done", "ok": False, "error": {"name": "E", "message": {}}}, "no message text"),
    ({"t": "done", "ok": False, "error": {"name": "E", "message": "m", "stack": 1}}, "stack is not text"),
    ({"t": "child", "name": "c", "ok": False, "message": []}, "message is not text"),
]


@pytest.mark.parametrize(("msg", "problem"), FORGED, ids=[p for _, p in FORGED])
def test_a_malformed_worker_message_is_refused_naming_what_is_wrong(msg: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        check_worker_message(json.loads(json.dumps(msg)))


def test_well_formed_worker_messages_pass_unchanged() -> None:
    for msg in (
        GOOD_AGENT,
        {"t": "done", "ok": True, "value": "1"},
        {"t": "done", "ok": False, "error": {"name": "E", "message": "m", "stack": "s"}},
        {"t": "log", "message": "m", "child": "c"},
        {"t": "dropped", "lines": 4},
        {"t": "call", "fn": "workflow", "id": 2, "target": {"scriptPath": "x.js"}, "args": "[]"},
    ):
        assert check_worker_message(dict(msg)) == msg
