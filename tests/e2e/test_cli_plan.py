"""``workflow-mcp plan``: a cost preview by dry run — its call counts are the calls a
fake-provider run makes, its tokens come from past runs of the workflow or per-model defaults, it says
when the cap or the budget would be reached — and ``run --confirm-above N``, which asks before a run
whose preview exceeds N calls."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cli import CLI, cli, no_traceback, write

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_ARGS = {"review-changes": '{"files": ["src/app.ts", "src/db.ts"]}'}


def plan(*argv: str, cwd: Path) -> dict[str, Any]:
    p = cli("plan", *argv, "--json", cwd=cwd)
    assert p.returncode == 0, p.stderr
    doc: dict[str, Any] = json.loads(p.stdout)
    return doc


def queued(p: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in p.stderr.splitlines() if line.startswith("{")]
    return [e for e in events if e["type"] == "agent.queued"]


@pytest.mark.parametrize("scripted", [True, False], ids=["scripted", "synthesized"])
@pytest.mark.parametrize("example", ["review-changes", "research-pipeline", "extract-until-dry"])
def test_plan_counts_the_calls_a_fake_provider_run_of_each_example_makes(
    tmp_path: Path, example: str, scripted: bool
) -> None:
    wf = REPO / "examples" / f"{example}.js"
    script = ["--fake-script", str(wf.with_suffix(".fake.json"))] if scripted else []
    args = [EXAMPLE_ARGS[example]] if example in EXAMPLE_ARGS else []

    preview = plan(str(wf), *args, *script, cwd=tmp_path)
    ran = cli("run", str(wf), *args, "--provider", "fake", *script, "--events", "jsonl", cwd=tmp_path)

    assert ran.returncode == 0, ran.stderr
    calls = queued(ran)
    assert preview["agentCalls"] == len(calls) > 0
    phases: dict[str, int] = {}
    for e in calls:
        phases[e["payload"]["phase"] or "(no phase)"] = (
            phases.get(e["payload"]["phase"] or "(no phase)", 0) + 1
        )
    assert preview["byPhase"] == phases
    assert preview["dryRun"] == {"status": "completed"}
    # The preview is not a run: nothing was recorded for it.
    listed = cli("runs", "list", "--json", cwd=tmp_path)
    assert len(json.loads(listed.stdout)) == 1


def test_plan_routes_calls_as_the_configuration_does_and_prices_them_per_model(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "routed.js",
        "export const meta = { name: 'routed', description: 'one call per model' }\n"
        "phase('Work')\n"
        "await agent('a', { label: 'security-a', model: 'opus' })\n"
        "await agent('b', { label: 'b', model: 'sonnet' })\n"
        "await agent('c', { label: 'c', model: 'sonnet' })\n"
        "return 'done'\n",
    )
    write(
        tmp_path / "workflow-mcp.toml",
        'default = "fake"\n'
        '[[rules]]\nlabel = "security-*"\nprovider = "claude"\n'
        "[estimates]\ninput_tokens = 1000\noutput_tokens = 100\n"
        "[estimates.models.opus]\noutput_tokens = 400\n",
    )

    preview = plan(str(wf), cwd=tmp_path)

    assert preview["agentCalls"] == 3 and preview["byPhase"] == {"Work": 3}
    assert preview["byProvider"]["claude"]["calls"] == 1
    assert preview["byProvider"]["claude"]["models"] == {"opus": 1}
    assert preview["byProvider"]["fake"]["models"] == {"sonnet": 2}
    assert preview["estimatedTokens"] == {"input": 3000, "output": 600}
    # built-in list prices: opus $5/$25, sonnet $3/$15 per million tokens
    expected = (1000 * 5 + 400 * 25) / 1e6 + 2 * (1000 * 3 + 100 * 15) / 1e6
    assert preview["estimatedCostUsd"] == pytest.approx(expected)
    assert preview["estimateBasis"]["defaults"] == 3


def test_plan_names_a_call_that_would_be_refused_before_it_runs(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "alias.js",
        "export const meta = { name: 'alias', description: 'a Claude alias on codex' }\n"
        "return await agent('x', { model: 'sonnet' })\n",
    )
    preview = plan(str(wf), "--provider", "codex", cwd=tmp_path)
    assert preview["byProvider"]["codex"]["calls"] == 1
    (problem,) = preview["problems"]
    assert "'sonnet' is a Claude model alias" in problem


def test_plan_learns_tokens_per_label_from_past_runs_of_the_workflow(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "learn.js",
        "export const meta = { name: 'learn', description: 'two kinds of call' }\n"
        "await agent('small', { label: 'small' })\n"
        "await agent('big', { label: 'big' })\n"
        "return 'ok'\n",
    )
    script = write(
        tmp_path / "tokens.json",
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"label": "small"},
                        "respond": {"text": "s", "tokens": {"input": 10, "output": 2}},
                    },
                    {
                        "match": {"label": "big"},
                        "respond": {"text": "b", "tokens": {"input": 500, "output": 90}},
                    },
                ]
            }
        ),
    )
    before = plan(str(wf), "--provider", "fake", cwd=tmp_path)
    first = cli(
        "run", str(wf), "--provider", "fake", "--fake-script", str(script), "--events", "none", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr

    after = plan(str(wf), "--provider", "fake", cwd=tmp_path)

    assert before["estimateBasis"]["history"] == 0 and before["estimatedTokens"] == {
        "input": 40000,
        "output": 4000,
    }
    assert after["estimateBasis"] == {"history": 2, "historyRuns": 1, "defaults": 0, "script": 0}
    assert after["estimatedTokens"] == {"input": 510, "output": 92}


BUDGET_LOOP = (
    "export const meta = { name: 'loop', description: 'calls until its budget is spent' }\n"
    "let n = 0\n"
    "while (budget.remaining() > 0) { await agent('call ' + n, { label: 'c' }); n++ }\n"
    "return n\n"
)


def test_plan_stops_a_budget_guarded_loop_where_the_estimates_spend_the_budget(tmp_path: Path) -> None:
    wf = write(tmp_path / "loop.js", BUDGET_LOOP)
    write(tmp_path / "workflow-mcp.toml", 'default = "fake"\n[estimates]\noutput_tokens = 1000\n')

    preview = plan(str(wf), "--token-budget", "5000", cwd=tmp_path)

    assert preview["agentCalls"] == 5
    assert preview["budget"] == {"total": 5000, "estimatedSpent": 5000, "wouldHit": True, "refusedCalls": 0}
    assert preview["cap"]["wouldHit"] is False


def test_plan_says_when_a_run_would_hit_the_call_cap(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "many.js",
        "export const meta = { name: 'many', description: 'more calls than the cap' }\n"
        "const out = []\n"
        "for (let i = 0; i < 12; i++) { try { out.push(await agent('c' + i)) } catch (e) { out.push(null) } }\n"
        "return out.length\n",
    )
    preview = plan(str(wf), "--max-agents", "10", cwd=tmp_path)
    assert preview["agentCalls"] == 10
    assert preview["cap"] == {"limit": 10, "admitted": 10, "wouldHit": True}


def test_plan_text_and_exit_codes(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "t.js",
        "export const meta = { name: 't', description: 'd' }\nphase('P')\nawait agent('x')\nthrow new Error('no')\n",
    )
    p = cli("plan", str(wf), "--provider", "fake", cwd=tmp_path)
    assert p.returncode == 1  # the dry run failed: the preview covers what ran
    assert p.stdout.startswith("t: 1 agent call(s)") and "phase P: 1" in p.stdout
    assert "the dry run ended failed" in p.stdout
    missing = cli("plan", str(tmp_path / "nope.js"), cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    no_traceback(missing)


FOUR_CALLS = (
    "export const meta = { name: 'four', description: 'four calls' }\n"
    "return await parallel([1, 2, 3, 4].map((i) => () => agent('call ' + i)))\n"
)


def test_run_confirm_above_refuses_without_a_terminal_and_runs_under_the_limit(tmp_path: Path) -> None:
    wf = write(tmp_path / "four.js", FOUR_CALLS)

    over = cli(
        "run", str(wf), "--provider", "fake", "--confirm-above", "3", "--events", "jsonl", cwd=tmp_path
    )
    under = cli(
        "run", str(wf), "--provider", "fake", "--confirm-above", "4", "--events", "none", cwd=tmp_path
    )

    assert over.returncode == 1 and over.stdout == ""
    assert "would make 4 agent calls, more than the 3 that may start without confirmation" in over.stderr
    assert "there is no terminal to ask" in over.stderr and "nothing was started" in over.stderr
    assert "agent.queued" not in over.stderr
    assert under.returncode == 0, under.stderr
    assert json.loads(under.stdout) == ["call 1", "call 2", "call 3", "call 4"]
    assert len(json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)) == 1
    no_traceback(over)


@pytest.mark.parametrize(("answer", "code"), [(b"y\n", 0), (b"n\n", 1)])
def test_run_confirm_above_asks_on_a_terminal(tmp_path: Path, answer: bytes, code: int) -> None:
    import os
    import pty
    import select
    import time

    from test_cli import CLI

    wf = write(tmp_path / "four.js", FOUR_CALLS)
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    master, slave = pty.openpty()
    argv = [CLI, "run", str(wf), "--provider", "fake", "--confirm-above", "3", "--events", "none"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=slave, stderr=slave, stdout=subprocess.PIPE)
    os.close(slave)
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while b"start this run?" not in seen:  # wait for the prompt (bounded), never sleep
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, seen
            seen += os.read(master, 4096)
        os.write(master, answer)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert b"four: 4 agent call(s)" in seen
    assert proc.returncode == code
    if code == 0:
        assert json.loads(out) == ["call 1", "call 2", "call 3", "call 4"]
    else:
        assert out == b""


def test_a_malformed_estimates_table_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", FOUR_CALLS)
    conf = write(tmp_path / "workflow-mcp.toml", '[estimates.models.opus]\noutput_tokens = "many"\n')
    p = cli("plan", str(wf), cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert str(conf) in p.stderr and "estimates.models.opus.output_tokens" in p.stderr
    assert "non-negative whole number" in p.stderr
    no_traceback(p)


def test_prices_in_the_user_configuration_apply_under_a_project_file_without_estimates(
    tmp_path: Path,
) -> None:
    wf = write(tmp_path / "ok.js", FOUR_CALLS)
    write(tmp_path / "workflow-mcp.toml", 'default = "fake"\n')
    write(
        tmp_path / "state" / "config.toml",
        "[estimates]\ninput_tokens = 100\noutput_tokens = 10\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n",
    )
    preview = plan(str(wf), cwd=tmp_path)
    assert preview["estimatedTokens"] == {"input": 400, "output": 40}
    assert preview["estimatedCostUsd"] == pytest.approx((400 * 1.0 + 40 * 2.0) / 1e6)


def test_plan_names_calls_no_provider_would_serve_where_nothing_is_configured(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "one.js",
        "export const meta = { name: 'one', description: 'one call' }\nreturn await agent('x', { label: 'x' })\n",
    )
    scrubbed = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k not in ("CODEX_HOME", "CLAUDE_CONFIG_DIR")
    }
    env = {**scrubbed, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)

    if json.loads(run("providers", "--json").stdout)["autoPick"] is not None:
        pytest.skip("a provider is ready here without configuration, so an unconfigured run would use it")
    preview = run("plan", str(wf), "--json")
    ran = run("run", str(wf), "--events", "none")

    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["problems"] == [
        "no provider serves this call (nothing is configured and none of codex, claude, acp is ready): a run "
        "would be refused; install or configure one, or pass --provider"
    ]
    assert ran.returncode == 2 and "no agent provider is available" in ran.stderr


def test_plan_names_calls_no_rule_routes_when_the_configuration_has_no_default(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "two.js",
        "export const meta = { name: 'two', description: 'two calls' }\n"
        "await agent('a', { label: 'review-a' })\nreturn await agent('b', { label: 'other' })\n",
    )
    config = write(tmp_path / "workflow-mcp.toml", '[[rules]]\nlabel = "review-*"\nprovider = "fake"\n')

    preview = plan(str(wf), cwd=tmp_path)
    ran = cli("run", str(wf), "--events", "none", cwd=tmp_path)

    assert preview["byProvider"]["fake"]["calls"] == 1
    assert preview["problems"] == [
        f"{config} names no default provider and no rule matches this call: a run would be refused; "
        'add default = "<provider>" or pass --provider'
    ]
    assert ran.returncode == 2 and "default: is required" in ran.stderr
