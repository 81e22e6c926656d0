"""Forbidden snippets: classic ``vm`` escapes, nondeterministic globals and runaway code, each run as
a real workflow in the real Node worker.

Every attempt must be contained: it throws inside the realm (with a realm-made error) or yields
nothing from the host. After each case the worker of that run is gone and a fresh run in the same
process still works (the host is unaffected). Node's ``vm`` is not a security boundary (see the
README), but nothing the runtime itself hands to the realm may open a door.

The probe reports one of:
    ``threw:<ErrorName>``      the attempt threw a realm error
    ``ok:<value or typeof>``   the attempt returned something harmless
    ``LEAK:<what>``            a host-realm error or object reached workflow code (never expected)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.errors import WorkflowLoadError

from helpers import MISSING, Outcome, pid_alive, run_source, workflow

# Every case runs twice: with the bare worker, and with the worker inside bubblewrap.
pytestmark = pytest.mark.usefixtures("realm_sandbox")

PROBE = r"""
const __foreign = (v) => v !== null && (typeof v === 'object' || typeof v === 'function') &&
  Object.getPrototypeOf(v) !== null && !(v instanceof Object)
const __hostish = (v) => v !== null && (typeof v === 'object' || typeof v === 'function') &&
  (typeof v.pid === 'number' || typeof v.binding === 'function' || typeof v.mainModule === 'object')
function probe(fn) {
  let v
  try { v = fn() } catch (e) { return __foreign(e) ? 'LEAK:foreign-error' : 'threw:' + (e && e.name) }
  if (__foreign(v)) return 'LEAK:foreign-value'
  if (__hostish(v)) return 'LEAK:host-object'
  return 'ok:' + (v !== null && (typeof v === 'object' || typeof v === 'function') ? typeof v : String(v))
}
"""

CODEGEN = "threw:EvalError"  # string code generation is disabled in the realm

INJECTED_FUNCTIONS = [
    "agent",
    "parallel",
    "pipeline",
    "workflow",
    "phase",
    "log",
    "setTimeout",
    "clearTimeout",
    "budget.spent",
    "budget.remaining",
    "console.log",
    "console.error",
]


def constructor_chains() -> list[Any]:
    cases = []
    for name in INJECTED_FUNCTIONS:
        cases.append(
            pytest.param(f"{name}.constructor('return process')()", CODEGEN, id=f"{name}.constructor")
        )
        cases.append(
            pytest.param(
                f"{name}.constructor.constructor('return process')()",
                CODEGEN,
                id=f"{name}.constructor.constructor",
            )
        )
        cases.append(
            pytest.param(
                f"Object.getPrototypeOf({name}).constructor('return process')()",
                CODEGEN,
                id=f"getPrototypeOf({name}).constructor",
            )
        )
    return cases


# Walks every prototype of a value and calls each own `constructor` with code; joins what happened.
WALK = r"""(start) => {
  const out = []
  for (let o = start; o !== null && o !== undefined; o = Object.getPrototypeOf(o)) {
    // a frozen intrinsic's constructor is an accessor (Claude's override taming): read it either way
    const c = Object.getOwnPropertyDescriptor(o, 'constructor')
    const ctor = c && ('value' in c ? c.value : c.get && c.get.call(o))
    if (typeof ctor === 'function') {
      let r
      try { r = ctor('return process') } catch (e) { out.push(e.name); continue }
      if (__foreign(r) || __hostish(r)) return r
      out.push(typeof r)
    }
  }
  return out.join(',')
}"""

ESCAPES = [
    *constructor_chains(),
    # objects injected with null prototypes
    pytest.param("Object.getPrototypeOf(budget) === null", "ok:true", id="budget-prototype-null"),
    pytest.param("Object.getPrototypeOf(console) === null", "ok:true", id="console-prototype-null"),
    pytest.param("budget.constructor('return process')()", "threw:TypeError", id="budget.constructor"),
    pytest.param(
        "(() => { const d = Object.getOwnPropertyDescriptor(budget, 'total'); return 'value' in d && !d.get })()",
        "ok:true",
        id="budget-total-is-a-data-property",
    ),
    pytest.param(
        "Object.isFrozen(budget) && Object.isFrozen(console)", "ok:true", id="budget-console-frozen"
    ),
    # The segments intrinsics are frozen once segment() first makes one (making one loads ICU data,
    # so a realm does not pay for it unless the workflow segments): before any code can hold them.
    pytest.param(
        "(() => { const s = new Intl.Segmenter().segment('ab'); const it = s[Symbol.iterator]();"
        " const P = Object.getPrototypeOf; const t = []; for (const x of s) t.push(x.segment);"
        " return Object.isFrozen(P(s)) && Object.isFrozen(P(it)) && t.join('|') === 'a|b'"
        " && Intl.Segmenter.prototype.segment.length === 1 && !('prototype' in Intl.Segmenter.prototype.segment) })()",
        "ok:true",
        id="segments-intrinsics-frozen",
    ),
    # prototype walks
    pytest.param(f"({WALK})(agent)", "ok:EvalError,object", id="walk-agent"),
    pytest.param(f"({WALK})(log)", "ok:EvalError,object", id="walk-log"),
    pytest.param(f"({WALK})(budget)", "ok:", id="walk-budget"),
    pytest.param(f"({WALK})(console)", "ok:", id="walk-console"),
    pytest.param(f"({WALK})(globalThis)", "ok:object,object", id="walk-global"),
    pytest.param(f"({WALK})(agent('x'))", "ok:TypeError,object", id="walk-agent-promise"),
    pytest.param(f"({WALK})(parallel([]))", "ok:TypeError,object", id="walk-parallel-promise"),
    # `this` and friends
    pytest.param("this.constructor.constructor('return process')()", CODEGEN, id="this.constructor"),
    pytest.param("this === globalThis", "ok:true", id="top-level-this-is-the-realm-global"),
    pytest.param(
        "Object.getPrototypeOf(globalThis).constructor.constructor('return process')()",
        CODEGEN,
        id="global-prototype.constructor",
    ),
    pytest.param("(function () { return this })()", "ok:undefined", id="strict-function-this"),
    pytest.param("(function () { return arguments.callee })()", "threw:TypeError", id="arguments.callee"),
    pytest.param("(function f() { return f.caller })()", "threw:TypeError", id="function.caller"),
    pytest.param("Function.prototype.caller", "threw:TypeError", id="Function.prototype.caller"),
    pytest.param(
        "agent('x').constructor.constructor('return process')()", CODEGEN, id="agent-promise.constructor"
    ),
    pytest.param(
        "(() => { try { null.x } catch (e) { return e.constructor.constructor('return process')() } })()",
        CODEGEN,
        id="realm-error.constructor",
    ),
    # code generation in every form
    pytest.param("eval('1 + 1')", CODEGEN, id="eval"),
    pytest.param("(0, eval)('1 + 1')", CODEGEN, id="indirect-eval"),
    pytest.param("new Function('return 1')()", CODEGEN, id="new-Function"),
    pytest.param("Function('return 1')()", CODEGEN, id="Function-call"),
    pytest.param(
        "Function.prototype.constructor('return process')()", CODEGEN, id="Function.prototype.constructor"
    ),
    pytest.param("(async () => {}).constructor('return process')", CODEGEN, id="async-function-constructor"),
    pytest.param(
        "(function* () {}).constructor('return process')", CODEGEN, id="generator-function-constructor"
    ),
    pytest.param(
        "(async function* () {}).constructor('return process')",
        CODEGEN,
        id="async-generator-function-constructor",
    ),
    pytest.param(
        "Reflect.construct(Function, ['return process'])()", CODEGEN, id="Reflect.construct-Function"
    ),
    # stack-trace hooks
    pytest.param(
        # Error is frozen (as in Claude Code): the hook can only come from a replaced global Error,
        # which profile 2.1.209 allows and 2.1.332 refuses
        "(() => { let frames = []; const E = Error;"
        " try { globalThis.Error = { prepareStackTrace: (e, f) => { frames = f; return '' } } } catch (x) {}"
        " new E('x').stack; try { globalThis.Error = E } catch (x) {}"
        " return frames.filter((f) => f.getFunction() !== undefined"
        " || f.getThis() !== undefined).length })()",
        "ok:0",
        id="prepareStackTrace-frames-hold-no-functions-or-receivers",
    ),
    pytest.param(
        "(() => { const o = {}; Error.captureStackTrace(o, agent); return typeof o.stack })()",
        "ok:string",
        id="captureStackTrace",
    ),
    # symbols
    pytest.param(
        "Reflect.ownKeys(agent).filter((k) => typeof k === 'symbol').length", "ok:0", id="agent-symbols"
    ),
    pytest.param(
        "agent[Symbol.for('nodejs.util.inspect.custom')]", "ok:undefined", id="inspect-custom-symbol"
    ),
    pytest.param(
        "Reflect.ownKeys(globalThis).filter((k) => typeof k === 'symbol').length", "ok:0", id="global-symbols"
    ),
    # absent and refused globals
    pytest.param("typeof WebAssembly", "ok:undefined", id="WebAssembly"),
    pytest.param("typeof SharedArrayBuffer", "ok:undefined", id="SharedArrayBuffer"),
    pytest.param("Atomics.wait(new Int32Array(4), 0, 0, 10)", "threw:ReferenceError", id="Atomics.wait"),
    pytest.param("typeof setInterval", "ok:undefined", id="setInterval"),
    pytest.param("typeof setImmediate", "ok:undefined", id="setImmediate"),
    pytest.param("typeof queueMicrotask", "ok:undefined", id="queueMicrotask"),
    pytest.param("typeof process", "ok:undefined", id="process"),
    pytest.param("typeof require", "ok:undefined", id="require"),
    pytest.param("typeof globalThis.process", "ok:undefined", id="globalThis.process"),
    pytest.param(
        "typeof module + typeof exports + typeof Buffer", "ok:undefinedundefinedundefined", id="module"
    ),
    pytest.param("typeof fetch + typeof performance", "ok:undefinedundefined", id="fetch-performance"),
    # determinism
    pytest.param("new Date(0).toISOString()", "ok:1970-01-01T00:00:00.000Z", id="new-Date-0"),
    pytest.param("Date.UTC(2020, 0, 1)", "ok:1577836800000", id="Date.UTC"),
    pytest.param("Reflect.construct(Date, [])", "threw:Error", id="Reflect.construct-Date"),
    pytest.param("Reflect.apply(Date, undefined, [])", "threw:Error", id="Reflect.apply-Date"),
    pytest.param("new Date(0).constructor.now()", "threw:Error", id="Date-instance-constructor.now"),
    pytest.param(
        "Object.getPrototypeOf(new Date(0)).constructor.now()", "threw:Error", id="Date.prototype.now"
    ),
    pytest.param("Date.now.call(null)", "threw:Error", id="Date.now.call"),
    pytest.param("Math.max(1, 2)", "ok:2", id="Math.max-still-works"),
]


def assert_host_unaffected(outcome: Outcome) -> None:
    """The case's worker is gone and a fresh run in this process still works."""
    pid = outcome.handle.realm_pid
    assert pid is not None
    assert not pid_alive(pid)
    again = run_source("return await agent('still fine')")
    assert (again.status, again.result) == ("completed", "still fine")


PROFILES = ["claude-code/2.1.332", "claude-code/2.1.209"]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("snippet", "expected"), ESCAPES)
def test_an_escape_attempt_is_contained_inside_the_realm(snippet: str, expected: str, profile: str) -> None:
    outcome = run_source(PROBE + f"const __r = probe(() => {snippet})\nreturn __r", profile=profile)
    assert outcome.status == "completed", outcome.error
    assert not str(outcome.result).startswith("LEAK"), outcome.result
    assert outcome.result == expected
    assert_host_unaffected(outcome)


ARGS_ESCAPES = [
    ("args.constructor.constructor('return process')()", CODEGEN),
    ("Object.getPrototypeOf(args).constructor.constructor('return process')()", CODEGEN),
    ("args.toString.constructor('return process')()", CODEGEN),
    ("args.valueOf.constructor.constructor('return process')()", CODEGEN),
    (f"typeof ({WALK})(args)", "ok:string"),
    (
        "Object.getPrototypeOf(new Proxy(Object(args), {})).constructor.constructor('return process')()",
        CODEGEN,
    ),
]


@pytest.mark.parametrize(
    "args", [{"files": ["a.ts"]}, [1, "two"], "src/a.ts"], ids=["object", "array", "string"]
)
@pytest.mark.parametrize(("snippet", "expected"), ARGS_ESCAPES)
def test_an_escape_through_args_is_contained(args: Any, snippet: str, expected: str) -> None:
    outcome = run_source(PROBE + f"return probe(() => {snippet})", args=args)
    assert outcome.status == "completed", outcome.error
    assert outcome.result == expected
    assert_host_unaffected(outcome)


# The stack-trace hook of a replaced global Error (profile 2.1.209 lets a workflow replace it; the
# intrinsic Error is frozen under both profiles, so Error.prepareStackTrace cannot be set).
FRAMES = (
    "const E = Error\n"
    "globalThis.Error = { prepareStackTrace: (e, frames) => frames }\n"
    "const frames = new E('x').stack\n"
    "globalThis.Error = E\n"
    "return { frames: frames.length, exposed: frames.filter((f) =>\n"
    "  f.getFunction() !== undefined || f.getThis() !== undefined).map((f) => f.getFileName()) }"
)


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(
            "await new Promise((resolve) => setTimeout(() => resolve((() => {{ {} }})()), 1))", id="timer"
        ),
        pytest.param("await agent('x').then(() => {{ {} }})", id="agent-continuation"),
        pytest.param("(await parallel([() => {{ {} }}]))[0]", id="parallel-thunk"),
        pytest.param("(await pipeline([1], () => {{ {} }}))[0]", id="pipeline-stage"),
    ],
)
def test_stack_frames_seen_from_callbacks_expose_no_host_function_or_receiver(wrap: str) -> None:
    outcome = run_source("return " + wrap.format(FRAMES), profile="claude-code/2.1.209")
    assert outcome.status == "completed", outcome.error
    assert outcome.result["frames"] > 0
    assert outcome.result["exposed"] == []
    assert_host_unaffected(outcome)


def test_args_built_inside_the_realm_are_realm_objects_and_writable() -> None:
    body = (
        PROBE + "const before = args instanceof Object && Object.getPrototypeOf(args) === Object.prototype\n"
        "args.extra = 1\nargs = 'replaced'\nreturn [before, args]"
    )
    outcome = run_source(body, args={"a": 1})
    assert outcome.result == [True, "replaced"]


# A host-realm error thrown into workflow code hands over the host's Function constructor (and with it
# `process`). The realm must catch every exception at the host boundary and rethrow a realm error.
def exhaust_stack_then(call: str) -> str:
    """Recurse until the stack overflows, then try ``call`` in every frame on the way back up until it
    either runs or throws something that is not a realm error; probe what it threw."""
    return (
        "let found = null, done = false\n"
        "function deep() {\n"
        "  try { deep() } catch (e) {}\n"
        "  if (done) return\n"
        f"  try {{ {call}; done = true }}\n"
        "  catch (e) { if (__foreign(e)) { found = e; done = true } }\n"
        "}\n"
        "deep()\n"
        "if (found === null) return 'contained'\n"
        "return probe(() => found.constructor.constructor('return process')())"
    )


HOST_ERROR_LEAKS = [
    pytest.param(exhaust_stack_then("log('x')"), id="stack-exhaustion-inside-log"),
    pytest.param(exhaust_stack_then("agent('x').catch(() => {})"), id="stack-exhaustion-inside-agent"),
    pytest.param(exhaust_stack_then("setTimeout(() => {}, 1)"), id="stack-exhaustion-inside-setTimeout"),
    pytest.param(
        exhaust_stack_then("agent('x', { a: [{ b: 1 }], get c() { return 2 } }).catch(() => {})"),
        id="stack-exhaustion-inside-the-options-copy",
    ),
    pytest.param(
        exhaust_stack_then("workflow('nope', { a: [1, { b: 2 }] }).catch(() => {})"),
        id="stack-exhaustion-inside-the-child-args-copy",
    ),
    pytest.param(
        exhaust_stack_then("console.log({ a: [1, { b: 2 }] })"), id="stack-exhaustion-inside-console"
    ),
    pytest.param(
        exhaust_stack_then("parallel([() => 1]).catch(() => {})"), id="stack-exhaustion-inside-parallel"
    ),
]


@pytest.mark.parametrize("body", HOST_ERROR_LEAKS)
def test_an_error_raised_in_the_host_never_reaches_workflow_code(body: str) -> None:
    outcome = run_source(PROBE + body)
    assert outcome.status == "completed", outcome.error
    # contained: nothing foreign was thrown, or what was thrown is a realm error (its constructor
    # chain ends at the realm's Function, which refuses code generation)
    assert outcome.result in ("contained", "threw:RangeError", "threw:Error"), outcome.result
    assert_host_unaffected(outcome)


# -- the boundary copy and the errors the host throws into workflow code ------------------------------
# agent() options, workflow() args and fan-out arrays are copied (own enumerable data, getters read) and
# rejected calls reject with null-prototype host errors: hostile values must stay contained, and every
# function a host error carries must be a realm function (its constructor refuses code generation).
SETTLE = r"""
function __codegen(f) { try { f.constructor('return process')(); return 'LEAK:codegen' } catch (x) { return x && x.name } }
async function settle(fn) {
  let v
  try { v = await fn() } catch (e) {
    if (__foreign(e)) return 'LEAK:foreign-error'
    if (e !== null && typeof e === 'object' && Object.getPrototypeOf(e) === null) {
      if (__codegen(e.toString) !== 'EvalError') return 'LEAK:host-error-function'
      if (Object.getPrototypeOf(e.toString) !== Function.prototype) return 'LEAK:host-error-function'
    }
    return 'rejected:' + (e && e.name)
  }
  if (__foreign(v)) return 'LEAK:foreign-value'
  if (__hostish(v)) return 'LEAK:host-object'
  return 'resolved:' + (v !== null && typeof v === 'object' ? typeof v : String(v))
}
const __revoked = (() => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy })()
"""

BOUNDARY_ESCAPES = [
    pytest.param(
        "agent('x', new Proxy({}, { ownKeys() { throw new Error('trap') } }))",
        "resolved:x",  # keys that cannot be listed: an empty copy (measured)
        id="options-proxy-whose-ownKeys-throws",
    ),
    pytest.param(
        "agent('x', { get model() { throw new TypeError('getter') } })",
        "resolved:x",
        id="options-getter-that-throws-is-dropped",
    ),
    pytest.param(
        "(async () => { let h; try { await parallel('x') } catch (e) { h = e }\n"
        " return agent('x', { get label() { throw h } }) })()",
        "resolved:x",
        id="options-getter-that-throws-a-host-error-is-dropped",
    ),
    pytest.param("agent('x', __revoked)", "rejected:TypeError", id="options-revoked-proxy"),
    pytest.param(
        "agent('x', { extra: { deep: [__revoked] } })",
        "resolved:x",  # a value that cannot be copied is dropped (measured)
        id="options-nested-revoked-proxy-is-dropped",
    ),
    pytest.param(
        "agent('x', new Proxy({ model: 'm' }, { get() { return () => 'from a trap' } }))",
        "resolved:x",
        id="options-proxy-handing-out-functions",
    ),
    pytest.param(
        "agent('x', { a: new Array(4097) })", "rejected:Error", id="options-array-bound-is-a-host-error"
    ),
    pytest.param(
        "workflow('nope', __revoked)", "rejected:Error", id="child-args-are-read-only-once-resolved"
    ),
    pytest.param(
        "workflow('nope', new Proxy({ a: 1 }, { get() { throw new RangeError('trap') } }))",
        "rejected:Error",
        id="child-args-proxy-whose-get-throws",
    ),
    pytest.param("workflow('nope', { a: [new Array(4097)] })", "rejected:Error", id="child-args-array-bound"),
    pytest.param("workflow(5)", "rejected:TypeError", id="workflow-type-error-is-a-host-error"),
    pytest.param(
        "parallel(new Proxy([() => 1], {"
        " get(t, k) { return k === 'map' ? () => { throw new SyntaxError('m') } : t[k] } }))",
        "resolved:object",
        id="fanout-proxy-array-is-read-by-index",
    ),
    pytest.param(
        "parallel(new Proxy([], { get(t, k) { if (k === 'length') throw new RangeError('len'); return t[k] } }))",
        "rejected:RangeError",
        id="fanout-proxy-whose-length-throws",
    ),
    pytest.param("parallel(__revoked)", "rejected:TypeError", id="fanout-revoked-proxy"),
    pytest.param("pipeline([1], 5)", "rejected:TypeError", id="pipeline-type-error-is-a-host-error"),
    pytest.param(
        "(async () => { console.log(new Proxy({}, { ownKeys() { throw new Error('trap') } }), __revoked);"
        " return 'logged' })()",
        "resolved:logged",
        id="console-of-hostile-proxies",
    ),
]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("snippet", "expected"), BOUNDARY_ESCAPES)
def test_a_hostile_value_at_the_boundary_stays_contained(snippet: str, expected: str, profile: str) -> None:
    outcome = run_source(PROBE + SETTLE + f"return await settle(() => {snippet})", profile=profile)
    assert outcome.status == "completed", outcome.error
    assert not str(outcome.result).startswith("LEAK"), outcome.result
    assert outcome.result == expected
    assert_host_unaffected(outcome)


@pytest.mark.parametrize(
    ("args", "expected"),
    [({"files": ["a.ts"]}, "resolved:x"), ([1, "two"], "rejected:TypeError"), ("src/a.ts", "resolved:x")],
    ids=["object", "array", "string"],
)
def test_a_proxy_over_the_run_args_as_options_is_copied_or_refused_in_the_realm(
    args: Any, expected: str
) -> None:
    # A throwing get trap drops each key of an object; an array's length read through the trap throws.
    body = "return await settle(() => agent('x', new Proxy(Object(args), { get() { throw new TypeError('trap') } })))"
    outcome = run_source(PROBE + SETTLE + body, args=args)
    assert outcome.result == expected


def test_options_nested_deeper_than_the_host_reads_reject_with_a_realm_error() -> None:
    body = (
        "let a = []; const root = a\nfor (let i = 0; i < 3000; i++) { const b = []; a.push(b); a = b }\n"
        "return await settle(() => agent('x', { model: root }))"
    )
    outcome = run_source(PROBE + SETTLE + body)
    assert outcome.result == "rejected:RangeError"
    assert_host_unaffected(outcome)


def test_a_final_value_whose_proxies_cannot_be_read_is_copied_without_them() -> None:
    body = (
        "const r = Proxy.revocable({}, {}); r.revoke()\n"
        "return { a: new Proxy({ k: 1 }, { ownKeys() { throw new TypeError('no') } }), b: r.proxy, c: [r.proxy] }"
    )
    outcome = run_source(body)
    assert (outcome.status, outcome.result) == ("completed", {"a": {}, "c": [None]}), outcome.error
    assert_host_unaffected(outcome)


CHILD_PROBE = (
    "export const meta = { name: 'child', description: 'returns and throws realm values' }\n"
    "if (args.k === 'throw') throw new TypeError('from the child')\n"
    "if (args.k === 'thenable') { Object.prototype.then = function (r) { delete Object.prototype.then; r('hijacked') } }\n"
    "return { a: [1, { b: 2 }], parentMarker: typeof globalThis.parentMarker, now: (() => { try { Date.now(); return 'ran' }"
    " catch (e) { return e.name } })(), process: typeof process }\n"
)


def test_a_child_realm_hands_its_parent_only_values_whose_functions_refuse_code_generation(
    tmp_path: Path,
) -> None:
    (tmp_path / "child.js").write_text(CHILD_PROBE)
    body = (
        "globalThis.parentMarker = 1\n"
        "const r = await workflow({ scriptPath: 'child.js' }, { k: 'value' })\n"
        "let thrown\ntry { await workflow({ scriptPath: 'child.js' }, { k: 'throw' }) } catch (e) { thrown = e }\n"
        "return { seen: [r.parentMarker, r.now, r.process],\n"
        "  codegen: [r.constructor, Object.getPrototypeOf(r).constructor, r.a.constructor, r.a[1].constructor,"
        " r.a.map, thrown.toString].map(__codegen),\n"
        "  thrown: [Object.getPrototypeOf(thrown) === null, thrown.name, thrown.message] }"
    )
    outcome = run_source(PROBE + SETTLE + body, cwd=str(tmp_path))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == {
        "seen": ["undefined", "Error", "undefined"],  # its own globals, locked like the parent's
        "codegen": ["EvalError"] * 6,
        "thrown": [True, "TypeError", "from the child"],
    }
    assert_host_unaffected(outcome)


def test_a_child_cannot_make_its_result_a_thenable_through_its_realm_s_frozen_object_prototype(
    tmp_path: Path,
) -> None:
    # Every realm's intrinsics are frozen (measured in Claude Code): the child's assignment to
    # Object.prototype.then throws, so workflow() rejects with that TypeError.
    (tmp_path / "child.js").write_text(CHILD_PROBE)
    outcome = run_source(
        "try { await workflow({ scriptPath: 'child.js' }, { k: 'thenable' }); return 'resolved' }"
        " catch (e) { return [e.name, typeof Object.prototype.then] }",
        cwd=str(tmp_path),
    )
    assert (outcome.status, outcome.result) == ("completed", ["TypeError", "undefined"]), outcome.error


def test_work_queued_in_an_ended_child_s_realm_still_runs(tmp_path: Path) -> None:
    # Array.fromAsync of the child realm (reached through its result) queues its jobs in that realm's
    # microtask queue after the child ended: the flush must still run them.
    (tmp_path / "list.js").write_text(
        "export const meta = { name: 'list', description: 'd' }\nreturn [1, 2]\n"
    )
    body = (
        "const r = await workflow({ scriptPath: 'list.js' })\n"
        "await agent('later')\n"  # the child is long over: a later answer touches only this realm
        "const got = await r.constructor.fromAsync([Promise.resolve(3), 4])\n"
        "return [got.length, got[0], got instanceof Array]"
    )
    outcome = run_source(body, cwd=str(tmp_path))
    assert (outcome.status, outcome.result) == ("completed", [2, 3, False]), outcome.error


def test_child_args_a_child_realm_cannot_copy_fail_the_child_with_a_host_error(tmp_path: Path) -> None:
    (tmp_path / "child.js").write_text(CHILD_PROBE)
    (tmp_path / "echo.js").write_text(
        "export const meta = { name: 'echo', description: 'd' }\n"
        "return [Object.keys(args), Object.keys(args.p), args.l.length, 0 in args.l, args.l[0]]\n"
    )
    body = (
        "const r = Proxy.revocable({}, {}); r.revoke()\n"
        "const P = new Proxy({ k: 1 }, { ownKeys() { throw new Error('trap') } })\n"
        "let root\ntry { await workflow({ scriptPath: 'child.js' }, r.proxy) } catch (e) { root = e }\n"
        "const seen = await workflow({ scriptPath: 'echo.js' }, { p: P, q: r.proxy, l: [r.proxy], ok: 1 })\n"
        "return { root: [Object.getPrototypeOf(root) === null, root.name, __codegen(root.toString)], seen }"
    )
    outcome = run_source(PROBE + SETTLE + body, cwd=str(tmp_path))
    assert outcome.status == "completed", outcome.error
    assert outcome.result == {
        "root": [True, "TypeError", "EvalError"],
        "seen": [["p", "l", "ok"], [], 1, True, None],
    }
    assert outcome.logs[1].startswith("▸ child failed: TypeError: ")
    assert_host_unaffected(outcome)


# -- dynamic import(), with the loader's refusal out of the way ------------------------------------
# 2.1.209 launches files that use import(); under 2.1.332 a static check that was fooled would do the
# same. Either way the rejection must be a realm error: these bodies bypass the loader entirely.

IMPORT_MESSAGE = "import() is not available in workflow scripts."  # Claude Code 2.1.209, measured
CAUGHT = "(async () => {{ try {{ await import('node:child_process') }} catch (e) {{ return {} }} }})()"

IMPORT_ESCAPES = [
    pytest.param(
        CAUGHT.format("probe(() => e.constructor.constructor('return process')())"),
        CODEGEN,
        id="rejection.constructor",
    ),
    pytest.param(CAUGHT.format("probe(() => e)"), "ok:object", id="rejection-is-a-realm-object"),
    pytest.param(
        CAUGHT.format("[e instanceof Error, e.name, e.message]"),
        ["ok", True, "Error", IMPORT_MESSAGE],
        id="rejection-like-claude",
    ),
    pytest.param(CAUGHT.format(f"({WALK})(e)"), "object,object", id="walk-rejection"),
    pytest.param(
        "(() => { const p = import('x'); p.catch(() => {}); return probe(() => p) })()",
        "ok:object",
        id="import-promise",
    ),
    pytest.param(
        f"(() => {{ const p = import('x'); p.catch(() => {{}}); return ({WALK})(p) }})()",
        "TypeError,object",
        id="walk-import-promise",
    ),
    pytest.param(
        "new Promise((resolve) => setTimeout(async () => { try { await import('x') } catch (e) {"
        " resolve(probe(() => e.constructor.constructor('return process')())) } }, 1))",
        CODEGEN,
        id="from-a-timer-callback",
    ),
    pytest.param(
        "agent('x').then(async () => { try { await import('x') } catch (e) {"
        " return probe(() => e.constructor.constructor('return process')()) } })",
        CODEGEN,
        id="from-an-agent-continuation",
    ),
    pytest.param(
        "parallel([async () => { try { await import('x') } catch (e) {"
        " return probe(() => e.constructor.constructor('return process')()) } }]).then((r) => r[0])",
        CODEGEN,
        id="from-a-parallel-thunk",
    ),
    pytest.param("import('x').then(() => 'loaded', () => 'rejected')", "rejected", id="then-settles"),
]


def unchecked(body: str, profile: str = "claude-code/2.1.332") -> Any:
    """A workflow whose body never went through the loader's static checks (as if they were fooled)."""
    return dataclasses.replace(workflow("return 1"), body=body, profile=profile)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(("snippet", "expected"), IMPORT_ESCAPES)
def test_a_dynamic_import_rejects_with_a_realm_error_even_past_the_loader(
    snippet: str, expected: Any, profile: str
) -> None:
    outcome = run_source(
        unchecked(PROBE + f"const __r = await {snippet}\nreturn __r", profile), profile=profile
    )
    assert outcome.status == "completed", outcome.error
    result = outcome.result
    if isinstance(expected, list):
        assert result == expected[1:]
    else:
        assert result == expected
    assert_host_unaffected(outcome)


def test_the_import_rejection_s_stack_frames_expose_no_host_function_or_receiver() -> None:
    # The rejection is made while the worker's own import hook is on the stack.
    body = (
        "let frames = []\n"
        "const E = Error\n"
        "globalThis.Error = { prepareStackTrace: (e, f) => { frames = f; return 'formatted' } }\n"
        "let stack\n"
        "try { await import('x') } catch (e) { stack = e.stack }\n"
        "globalThis.Error = E\n"
        "return { stack, frames: frames.length, exposed: frames.filter((f) =>\n"
        "  f.getFunction() !== undefined || f.getThis() !== undefined).map((f) => f.getFileName()) }"
    )
    outcome = run_source(unchecked(body), profile="claude-code/2.1.209")
    assert outcome.status == "completed", outcome.error
    assert outcome.result["stack"] == "formatted" and outcome.result["frames"] > 0
    assert outcome.result["exposed"] == []
    assert_host_unaffected(outcome)


def test_an_uncaught_dynamic_import_fails_the_run_with_claudes_message() -> None:
    outcome = run_source(unchecked("await import('node:fs')\nreturn 1"))
    assert outcome.status == "failed"
    assert IMPORT_MESSAGE in str(outcome.error)
    assert_host_unaffected(outcome)


def test_a_pending_import_rejection_is_not_mistaken_for_a_deadlock() -> None:
    outcome = run_source(unchecked("return await import('x').catch(() => 'settled')"))
    assert (outcome.status, outcome.result) == ("completed", "settled")


def test_a_real_deadlock_after_an_import_is_still_detected() -> None:
    outcome = run_source(unchecked("import('x').catch(() => {})\nawait new Promise(() => {})\nreturn 1"))
    assert outcome.status == "failed"
    assert "nothing will ever settle" in str(outcome.error)


def test_a_dynamic_import_in_a_nested_child_is_contained(tmp_path: Path) -> None:
    # Under 2.1.209 the child loads (import() is a warning there) and runs its import().
    (tmp_path / "child.js").write_text(
        "export const meta = { name: 'child', description: 'imports' }\n"
        "try { await import('node:fs') } catch (e) {\n"
        "  try { return e.constructor.constructor('return process')().pid } catch (x) { return x.name }\n"
        "}\n"
    )
    parent = workflow("return await workflow({ scriptPath: 'child.js' })")
    parent = dataclasses.replace(parent, profile="claude-code/2.1.209")
    outcome = run_source(parent, profile="claude-code/2.1.209", cwd=str(tmp_path))
    assert (outcome.status, outcome.result) == ("completed", "EvalError"), outcome.error
    assert_host_unaffected(outcome)


def test_a_dynamic_import_is_refused_before_launch() -> None:
    with pytest.raises(WorkflowLoadError) as caught:
        workflow("const fs = await import('node:fs')\nreturn 1")
    assert caught.value.rule == "dynamic-import"


def test_import_mentioned_only_in_strings_and_comments_runs() -> None:
    outcome = run_source("// import('x')\nreturn \"import('node:fs')\"")
    assert outcome.result == "import('node:fs')"


NONDETERMINISTIC = ["Date.now()", "new Date()", "Date()", "Math.random()"]


@pytest.mark.parametrize("call", NONDETERMINISTIC)
def test_a_nondeterministic_call_throws_a_catchable_error_that_names_the_fix(call: str) -> None:
    body = f"try {{ {call}; return 'ran' }} catch (e) {{ return [e instanceof Error, e.message] }}"
    outcome = run_source(body)
    assert outcome.status == "completed", outcome.error
    is_error, message = outcome.result
    assert is_error is True
    assert call in message
    assert "args" in message


@pytest.mark.parametrize("call", NONDETERMINISTIC)
def test_an_uncaught_nondeterministic_call_fails_the_run_naming_the_global(call: str) -> None:
    outcome = run_source(f"return {call}")
    assert outcome.status == "failed"
    assert call in str(outcome.error)
    assert_host_unaffected(outcome)


# -- timers ------------------------------------------------------------------------------------


def test_timers_fire_in_delay_order_and_equal_delays_in_creation_order() -> None:
    body = (
        "const order = []\n"
        "await new Promise((resolve) => {\n"
        "  setTimeout(() => order.push('30'), 30)\n"
        "  setTimeout(() => order.push('0'), 0)\n"
        "  setTimeout(() => order.push('10a'), 10)\n"
        "  setTimeout(() => order.push('10b'), 10)\n"
        "  setTimeout(() => order.push('neg'), -5)\n"
        "  setTimeout(resolve, 80)\n"
        "})\n"
        "return order"
    )
    assert run_source(body).result == ["0", "neg", "10a", "10b", "30"]


def test_timers_made_in_one_synchronous_stretch_fire_in_delay_order_however_long_it_runs() -> None:
    # Due times count from the start of the stretch, not from each call: the runtime's own work
    # between two calls (or a slow machine) never reorders them.
    body = (
        "const order = []\n"
        "await new Promise((resolve) => {\n"
        "  setTimeout(() => order.push('2 ms'), 2)\n"
        "  let x = 0\n"
        "  for (let i = 0; i < 2e7; i++) x += i\n"
        "  setTimeout(() => order.push('1 ms'), 1)\n"
        "  setTimeout(resolve, 3)\n"
        "})\n"
        "return order"
    )
    assert run_source(body).result == ["1 ms", "2 ms"]


def test_clear_timeout_cancels_a_pending_timer_and_ignores_unknown_ids() -> None:
    body = (
        "const order = []\n"
        "const a = setTimeout(() => order.push('a'), 5)\n"
        "const b = setTimeout(() => order.push('b'), 40)\n"
        "setTimeout(() => { order.push('c'); clearTimeout(b) }, 10)\n"
        "clearTimeout(a)\n"
        "clearTimeout(123456)\n"
        "clearTimeout(undefined)\n"
        "await new Promise((resolve) => setTimeout(resolve, 80))\n"
        "return { order, distinct: a !== b }"
    )
    assert run_source(body).result == {"order": ["c"], "distinct": True}


def test_set_timeout_calls_its_callback_without_the_extra_arguments_as_claude_does() -> None:
    body = "return await new Promise((resolve) => setTimeout((...a) => resolve(a.length), 1, 'one', 2))"
    assert run_source(body).result == 0


# -- runaway code ------------------------------------------------------------------------------

RUNAWAY = [
    pytest.param("while (true) {}", id="loop-before-any-await"),
    pytest.param("await agent('x')\nwhile (true) {}", id="loop-after-an-await"),
    pytest.param("await new Promise((r) => setTimeout(r, 1))\nfor (;;) {}", id="loop-after-a-timer"),
    pytest.param(
        "await new Promise((r) => setTimeout(() => { while (true) {} }, 1))\nreturn 1",
        id="loop-in-a-timer-callback",
    ),
    pytest.param(
        "await Promise.resolve().then(() => { while (true) {} })\nreturn 1", id="loop-in-a-then-callback"
    ),
    pytest.param(
        "await agent('x').then(() => { while (true) {} })\nreturn 1", id="loop-in-an-agent-continuation"
    ),
    pytest.param("await parallel([() => { while (true) {} }])\nreturn 1", id="loop-in-a-parallel-thunk"),
    pytest.param(
        "const f = () => Promise.resolve().then(f)\nf()\nawait new Promise(() => {})", id="microtask-flood"
    ),
]


@pytest.mark.parametrize("body", RUNAWAY)
def test_runaway_synchronous_code_fails_the_run_with_the_time_limit(body: str) -> None:
    outcome = run_source(body, sync_timeout_ms=500)
    assert outcome.status == "failed"
    assert re.search(r"(?i)synchronous", str(outcome.error)), outcome.error
    assert "500 ms" in str(outcome.error)
    assert_host_unaffected(outcome)


def test_a_memory_bomb_fails_the_run_with_a_memory_message() -> None:
    outcome = run_source("const a = []\nwhile (true) a.push(new Array(1e6).fill(1))", heap_mb=64)
    assert outcome.status == "failed"
    assert re.search(r"(?i)memory", str(outcome.error)), outcome.error
    assert "64 MB" in str(outcome.error)
    assert_host_unaffected(outcome)


def test_a_huge_string_result_arrives_whole() -> None:
    outcome = run_source("return 'x'.repeat(5_000_000) + 'end'")
    assert outcome.status == "completed", outcome.error
    assert len(outcome.result) == 5_000_003 and outcome.result.endswith("xend")
    assert_host_unaffected(outcome)


def test_a_huge_log_message_is_cut_in_the_middle_as_claude_code_cuts_it() -> None:
    # Claude Code 2.1.332 (measured): first and last 5,000 units around a marker counting the rest.
    outcome = run_source("log('y'.repeat(2_000_000) + 'END')\nreturn 1")
    assert outcome.status == "completed", outcome.error
    expected = "y" * 5_000 + "\n\n... [1990003 characters truncated] ...\n\n" + "y" * 4_997 + "END"
    assert outcome.logs == [expected]


DEEP = "let o = {}; const root = o\nfor (let i = 0; i < 1500; i++) { o.a = {}; o = o.a }\n"


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("return root", id="final-value"),
        pytest.param(
            "try { await agent('x', { model: root }) } catch (e) {}\nreturn 'ok'", id="agent-option"
        ),
        pytest.param(
            "try { await agent('x', { unknown: root }) } catch (e) {}\nreturn 'ok'", id="unknown-option"
        ),
    ],
)
def test_a_deeply_nested_value_never_crashes_the_host(tail: str) -> None:
    outcome = run_source(DEEP + tail)
    assert outcome.status in ("completed", "failed")
    assert_host_unaffected(outcome)


def test_a_run_without_args_sees_undefined_and_a_fresh_realm_each_time() -> None:
    first = run_source("globalThis.leftover = 1\nreturn typeof args")
    second = run_source("return typeof globalThis.leftover", args=MISSING)
    assert (first.result, second.result) == ("undefined", "undefined")


@pytest.mark.parametrize("profile", PROFILES)
def test_the_stack_trace_hooks_of_the_frozen_error_cannot_be_set(profile: str) -> None:
    # measured in Claude Code 2.1.332 and 2.1.209: Error is frozen; 2.1.332 also makes the global
    # Error read-only, so no stack-trace hook can be installed at all
    body = (
        "const t = (f) => { try { f(); return 'set' } catch (e) { return e.name } }\n"
        "return [t(() => { Error.prepareStackTrace = () => 1 }), t(() => { Error.stackTraceLimit = 50 }),"
        " Error.stackTraceLimit, t(() => { globalThis.Error = {} })]"
    )
    outcome = run_source(body, profile=profile)
    assert outcome.status == "completed", outcome.error
    replaced = "set" if profile == "claude-code/2.1.209" else "TypeError"
    assert outcome.result == ["TypeError", "TypeError", 10, replaced]
