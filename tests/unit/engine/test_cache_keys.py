"""v2 cache keys (profile claude-code/2.1.332, PROFILE-FACTS "Journal and cache keys").

The keys are read from the ``agent.queued`` events of real runs and compared with an independent
Python model of the documented formula, which itself reproduces the prefixes measured in Claude Code
(``agent('first')`` → ``v2:9f3809c9…``; the first parallel slot after it → ``v2:38d1c85a…``)::

    H(a, b, …) = hex(sha256(a + "\\0" + b + "\\0" + …))
    key(prev, prompt, opts) = "v2:" + H(prev, prompt, canon(opts))
    slot i of a fan-out entered with chain P starts at H(P, kind, "slot:" + i)
    the parent continues at F = H(P, kind, "fork"), and after the join at H(F, kind, "join", final_0, …)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from helpers import run_source

CACHE_KEY_OPTIONS = (
    "schema",
    "model",
    "effort",
    "isolation",
    "agentType",
    "disallowedTools",
    "bashCommandClamp",
)


def H(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def canon(opts: dict[str, Any]) -> str:
    picked = {k: v for k, v in opts.items() if k in CACHE_KEY_OPTIONS}
    return json.dumps(picked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key(prev: str, prompt: str, opts: dict[str, Any] | None = None) -> str:
    return "v2:" + H(prev, prompt, canon(opts or {}))


def slot(parent: str, kind: str, i: int) -> str:
    return H(parent, kind, f"slot:{i}")


def joined(parent: str, kind: str, finals: list[str]) -> str:
    return H(H(parent, kind, "fork"), kind, "join", *finals)


def keys_by_label(body: str) -> dict[str, str]:
    outcome = run_source(body)
    assert outcome.status == "completed", outcome.error
    out: dict[str, str] = {}
    for e in outcome.of("agent.queued"):
        assert e.payload["label"] not in out, "labels must be unique in these tests"
        out[e.payload["label"]] = e.payload["key"]
    return out


SCHEMA_JS = "{ type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }"
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def test_the_model_reproduces_the_prefixes_measured_in_claude_code() -> None:
    first = key("", "first")
    assert first.startswith("v2:9f3809c9")
    assert key(slot(first, "parallel", 0), "p0").startswith("v2:38d1c85a")


def test_the_first_call_of_a_run_has_the_key_measured_in_claude_code() -> None:
    keys = keys_by_label("await agent('first')")
    assert keys["first"].startswith("v2:9f3809c9")
    assert keys["first"] == key("", "first")


def test_a_parallel_after_a_call_forks_and_joins_the_chain_as_measured_in_claude_code() -> None:
    keys = keys_by_label(
        "await agent('first')\n"
        f"await parallel([() => agent('p0'), () => agent('p1', {{ model: 'haiku', schema: {SCHEMA_JS} }})])\n"
        "await agent('after')"
    )
    first = key("", "first")
    p0 = key(slot(first, "parallel", 0), "p0")
    p1 = key(slot(first, "parallel", 1), "p1", {"model": "haiku", "schema": SCHEMA})
    assert keys["p0"].startswith("v2:38d1c85a")
    assert (keys["first"], keys["p0"], keys["p1"]) == (first, p0, p1)
    assert keys["after"] == key(joined(first, "parallel", [p0, p1]), "after")


def test_calls_in_sequence_chain_each_key_on_the_previous_one() -> None:
    keys = keys_by_label("await agent('a')\nawait agent('b')\nawait agent('c')")
    a = key("", "a")
    b = key(a, "b")
    assert (keys["a"], keys["b"], keys["c"]) == (a, b, key(b, "c"))


def test_a_slot_keeps_its_own_chain_across_awaits_and_a_slot_without_calls_ends_at_its_start() -> None:
    keys = keys_by_label(
        "await parallel([\n"
        "  async () => {\n"
        "    await agent('s0a'); await new Promise((r) => setTimeout(r, 5)); return agent('s0b')\n"
        "  },\n"
        "  () => 'no call',\n"
        "  () => agent('s2').then(() => agent('s2b')),\n"
        "])\n"
        "await agent('after')"
    )
    s0a = key(slot("", "parallel", 0), "s0a")
    s0b = key(s0a, "s0b")
    s2 = key(slot("", "parallel", 2), "s2")
    s2b = key(s2, "s2b")
    assert (keys["s0a"], keys["s0b"], keys["s2"], keys["s2b"]) == (s0a, s0b, s2, s2b)
    finals = [s0b, slot("", "parallel", 1), s2b]
    assert keys["after"] == key(joined("", "parallel", finals), "after")


def test_pipeline_stages_chain_one_after_another_inside_each_slot() -> None:
    keys = keys_by_label(
        "await agent('before')\n"
        "await pipeline(['x', 'y'], (item) => agent('one ' + item), (prev, item) => agent('two ' + item))\n"
        "await agent('after')"
    )
    before = key("", "before")
    finals = []
    for i, item in enumerate(["x", "y"]):
        one = key(slot(before, "pipeline", i), f"one {item}")
        two = key(one, f"two {item}")
        assert (keys[f"one {item}"], keys[f"two {item}"]) == (one, two)
        finals.append(two)
    assert keys["after"] == key(joined(before, "pipeline", finals), "after")


def test_a_fan_out_inside_a_slot_forks_from_that_slots_chain() -> None:
    keys = keys_by_label("await parallel([() => parallel([() => agent('inner0'), () => agent('inner1')])])")
    outer = slot("", "parallel", 0)
    assert keys["inner0"] == key(slot(outer, "parallel", 0), "inner0")
    assert keys["inner1"] == key(slot(outer, "parallel", 1), "inner1")


@pytest.mark.parametrize(
    "options",
    [
        "{ label: 'x' }",
        "{ phase: 'Somewhere' }",
        "{ stallMs: 1000 }",
        "{ sharedHeadLength: 10 }",
        "{ totallyUnknown: { a: 1 } }",
    ],
)
def test_options_that_do_not_affect_execution_leave_the_key_unchanged(options: str) -> None:
    keys = keys_by_label(f"await agent('p', Object.assign({options}, {{ label: 'with' }}))")
    assert keys["with"] == key("", "p")


@pytest.mark.parametrize(
    ("js", "opts"),
    [
        ("{ model: 'opus' }", {"model": "opus"}),
        ("{ effort: 'low' }", {"effort": "low"}),
        ("{ agentType: 'general-purpose' }", {"agentType": "general-purpose"}),
        ("{ isolation: 'worktree' }", {"isolation": "worktree"}),
        (f"{{ schema: {SCHEMA_JS} }}", {"schema": SCHEMA}),
        (
            "{ model: 'opus', effort: 'high', disallowedTools: ['Bash'] }",
            {"model": "opus", "effort": "high", "disallowedTools": ["Bash"]},
        ),
    ],
)
def test_execution_affecting_options_enter_the_key_canonically(js: str, opts: dict[str, Any]) -> None:
    keys = keys_by_label(f"await agent('p', Object.assign({js}, {{ label: 'with' }}))")
    assert keys["with"] == key("", "p", opts)
    assert keys["with"] != key("", "p")


def test_the_order_of_keys_in_an_options_object_does_not_change_the_key() -> None:
    keys = keys_by_label(
        "await parallel([\n"
        "  () => agent('p', { label: 'a', model: 'm', schema: { required: ['ok'], type: 'object',"
        " properties: { ok: { type: 'boolean' } } } }),\n"
        f"  () => agent('p', {{ schema: {SCHEMA_JS}, label: 'b', model: 'm' }}),\n"
        "])"
    )
    a_chain, b_chain = slot("", "parallel", 0), slot("", "parallel", 1)
    assert keys["a"] == key(a_chain, "p", {"model": "m", "schema": SCHEMA})
    assert keys["b"] == key(b_chain, "p", {"model": "m", "schema": SCHEMA})


def test_a_non_ascii_prompt_and_option_hash_as_utf8_without_escapes() -> None:
    keys = keys_by_label("await agent('résumé ✓', { label: 'u', model: 'modèle' })")
    assert keys["u"] == key("", "résumé ✓", {"model": "modèle"})
