"""What the run viewer shows of a run: queue time apart from run time, a paused run's banner with the
command that resumes it, and the bounds and redaction of ``workflow_run_status`` (no prompt, no result
body in the stream; every string clipped; markup escaped)."""

from __future__ import annotations

from typing import Any

from workflow_mcp._prices import parse_prices
from workflow_mcp.events import Event
from workflow_mcp.server.mcp import PRINCIPAL_SCOPE_KEY
from workflow_mcp.server.viewer import event_view, run_view
from workflow_mcp.server.viewer._app import PRINCIPAL_KEY
from workflow_mcp.server.viewer._pages import run_page
from workflow_mcp.server.viewer._view import MAX_LOG_LINES, MAX_RESULT_BYTES
from workflow_mcp.state import project_state
from workflow_mcp.timeline import epoch_ms

RUN = "run_x"


def log_of(*items: tuple[str, dict[str, Any], str | None, str]) -> list[Event]:
    return [
        Event(RUN, i, kind, payload, timestamp=stamp, agent_id=agent)
        for i, (kind, payload, agent, stamp) in enumerate(items, start=1)
    ]


def started(**extra: Any) -> tuple[str, dict[str, Any], None, str]:
    return (
        "run.started",
        {"workflow": {"name": "w"}, "provider": "fake", **extra},
        None,
        "2026-01-01T00:00:00.000Z",
    )


def test_an_agent_bar_keeps_its_queue_time_apart_from_its_run_time() -> None:
    events = log_of(
        started(),
        ("agent.queued", {"label": "a", "phase": "P"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.started", {"label": "a", "phase": "P", "model": "sonnet"}, "ag_1", "2026-01-01T00:00:03.500Z"),
        ("agent.completed", {"label": "a", "phase": "P", "result": "ok", "tokenUsage": {"input": 5, "output": 2}},
         "ag_1", "2026-01-01T00:00:04.000Z"),
    )  # fmt: skip
    view = run_view(project_state(events, RUN), events)
    (agent,) = view["agents"]
    assert agent["startedAt"] - agent["queuedAt"] == 2500 and agent["endedAt"] - agent["startedAt"] == 500
    assert agent["model"] == "sonnet" and agent["provider"] == "fake" and agent["state"] == "completed"
    assert [(lane["title"], lane["agentIds"]) for lane in view["lanes"]] == [("P", ["ag_1"])]
    assert view["tokensByPhase"] == [{"name": "P", "input": 5, "output": 2, "agents": 1, "cost": None}]
    assert view["tokensByProvider"] == [{"name": "fake", "input": 5, "output": 2, "agents": 1, "cost": None}]
    assert view["cost"] is None  # no price table: no cost, not a guess
    assert epoch_ms("2026-01-01T00:00:04.000Z") == agent["endedAt"] and epoch_ms("not a time") is None


def test_an_agent_shows_its_stored_prompt_preview_and_the_provider_and_model_it_was_routed_to() -> None:
    events = log_of(
        started(),
        ("agent.queued", {"label": "a", "promptPreview": "Review [redacted] please"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.started", {"label": "a", "model": "gpt-5", "provider": "codex"}, "ag_1", "2026-01-01T00:00:02.000Z"),
        ("agent.completed", {"label": "a", "result": "ok", "provider": "claude"}, "ag_1", "2026-01-01T00:00:03.000Z"),
        ("agent.queued", {"label": "b"}, "ag_2", "2026-01-01T00:00:04.000Z"),  # stored before previews
        ("agent.started", {"label": "b", "model": "sonnet"}, "ag_2", "2026-01-01T00:00:05.000Z"),
    )  # fmt: skip
    a, b = run_view(project_state(events, RUN), events)["agents"]
    assert (a["promptPreview"], a["provider"], a["model"]) == ("Review [redacted] please", "codex", "gpt-5")
    assert (b["promptPreview"], b["provider"], b["model"]) == (None, "fake", "sonnet")  # the run's provider


def test_a_call_replayed_in_the_realm_shows_the_preview_its_only_event_stored_as_cached() -> None:
    # A call the realm replays by itself has no agent.queued: its agent.cached carries the preview, and
    # the delivery that handed its result over is an agent.delivered naming no agent.
    events = log_of(
        started(),
        ("agent.cached", {"label": "a", "promptPreview": "Ask [redacted]", "result": "ok"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.delivered", {"turn": 1, "agentIds": ["ag_1"]}, None, "2026-01-01T00:00:02.000Z"),
    )  # fmt: skip
    (a,) = run_view(project_state(events, RUN), events)["agents"]
    assert (a["state"], a["promptPreview"], a["cached"]) == ("cached", "Ask [redacted]", True)


def test_cost_is_known_per_call_phase_provider_and_run_only_where_every_call_is_priced() -> None:
    prices = parse_prices(
        {
            "currency": "EUR",
            "codex": {"gpt-5": {"input": 2.0, "output": 10.0}},
            "claude": {"*": {"input": 3.0, "output": 15.0}},
        },
        "prices.toml",
    )

    def call(n: int, phase: str, provider: str, model: str | None, tokens: dict[str, int]) -> list[Any]:
        agent, t = f"ag_{n}", f"2026-01-01T00:00:0{n}.000Z"
        return [
            ("agent.queued", {"label": agent, "phase": phase}, agent, t),
            (
                "agent.started",
                {"label": agent, "phase": phase, "model": model, "provider": provider},
                agent,
                t,
            ),
            (
                "agent.completed",
                {"label": agent, "phase": phase, "result": "ok", "tokenUsage": tokens},
                agent,
                t,
            ),
        ]

    items = [
        started(),
        *call(1, "Plan", "codex", "gpt-5", {"input": 1_000_000, "output": 100_000}),  # 2 + 1
        *call(2, "Plan", "claude", "opus", {"input": 100_000, "output": 0}),  # 0.3, by claude's "*"
        *call(3, "Build", "claude", None, {"input": 0, "output": 10_000}),  # 0.15
    ]
    priced = log_of(*items)
    view = run_view(project_state(priced, RUN), priced, prices=prices)
    assert view["currency"] == "EUR" and view["cost"] == 3.45
    assert [a["cost"] for a in view["agents"]] == [3.0, 0.3, 0.15]
    assert {r["name"]: r["cost"] for r in view["tokensByPhase"]} == {"Plan": 3.3, "Build": 0.15}
    assert {r["name"]: r["cost"] for r in view["tokensByProvider"]} == {"codex": 3.0, "claude": 0.45}

    unpriced = log_of(
        *items,
        *call(4, "Build", "codex", "gpt-4", {"input": 10, "output": 1}),  # no price for gpt-4
        *call(5, "Build", "codex", "gpt-5", {"input": 10, "cacheRead": 5}),  # no cache_read price
    )
    view = run_view(project_state(unpriced, RUN), unpriced, prices=prices)
    assert view["cost"] is None and [a["cost"] for a in view["agents"]][3:] == [None, None]
    assert {r["name"]: r["cost"] for r in view["tokensByPhase"]} == {"Plan": 3.3, "Build": None}
    assert {r["name"]: r["cost"] for r in view["tokensByProvider"]} == {"codex": None, "claude": 0.45}
    page = run_page(view, base="/ui", stream=False)
    assert '<dd id="cost">—</dd>' in page and "<td>3.3000 EUR</td>" in page


def test_a_paused_run_shows_why_and_the_command_that_resumes_it() -> None:
    events = log_of(
        started(),
        ("agent.queued", {"label": "a"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.started", {"label": "a"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.failed", {"label": "a", "reason": "cancelled", "message": "paused"}, "ag_1", "2026-01-01T00:00:02.000Z"),
        ("run.paused", {"reason": "usage_limit", "resetsAt": "2026-01-01T05:00:00Z"}, None, "2026-01-01T00:00:02.000Z"),
    )  # fmt: skip
    view = run_view(project_state(events, RUN), events)
    assert view["status"] == "paused" and view["resumable"] and view["terminal"]
    assert view["agents"][0]["state"] == "cancelled"
    html = run_page(view, base="/ui", stream=True)
    assert "<strong>Paused:</strong> usage_limit." in html and "resets at 2026-01-01T05:00:00Z" in html
    assert "<code>workflow-mcp resume run_x</code>" in html
    assert '<button type="button" id="resume">' in html and 'id="cancel" hidden' in html


def test_the_stream_carries_no_prompt_key_or_result_and_strings_are_clipped() -> None:
    secret = "the prompt and its secret"
    queued = Event(
        RUN, 2, "agent.queued", {"label": "x" * 900, "prompt": secret, "key": "v2:abc"}, agent_id="ag_1"
    )
    done = Event(RUN, 3, "agent.completed", {"label": "l", "result": {"token": secret}}, agent_id="ag_1")
    for event in (queued, done):
        out = event_view(event)
        assert secret not in str(out) and "v2:abc" not in str(out)
        assert set(out["payload"]) <= {"label", "phase", "title", "status", "reason", "outcome", "model",
                                       "provider", "message"}  # fmt: skip
    assert len(event_view(queued)["payload"]["label"]) == 200


def test_a_page_is_bounded_and_escapes_what_the_workflow_wrote() -> None:
    events = log_of(
        started(),
        ("agent.queued", {"label": "<script>alert(1)</script>"}, "ag_1", "2026-01-01T00:00:01.000Z"),
        ("agent.completed", {"label": "<script>alert(1)</script>", "result": "r" * 5000}, "ag_1",
         "2026-01-01T00:00:02.000Z"),
        *[("log", {"message": f"line {i} " + "y" * 900}, None, "2026-01-01T00:00:02.000Z") for i in range(250)],
        ("run.completed", {"result": {"big": "z" * (MAX_RESULT_BYTES + 10)}}, None, "2026-01-01T00:00:03.000Z"),
    )  # fmt: skip
    view = run_view(project_state(events, RUN), events)
    assert len(view["agents"][0]["preview"]) <= 300
    assert len(view["logs"]) == MAX_LOG_LINES and view["logsDropped"] == 50
    assert all(len(line) <= 500 for line in view["logs"]) and view["logs"][0].startswith("line 50 ")
    assert view["resultTruncated"] and len(view["result"].encode()) <= MAX_RESULT_BYTES
    html = run_page(view, base="/ui", stream=True)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Result (JSON, cut)" in html


def test_the_viewer_reads_the_caller_where_the_http_guard_puts_it() -> None:
    assert PRINCIPAL_KEY == PRINCIPAL_SCOPE_KEY
