"""The live terminal view of ``run`` (the ``runs watch`` screen) follows the phase the run is in, not
the phases it lists."""

from __future__ import annotations

from workflow_mcp.cli_watch import LiveRunView
from workflow_mcp.events import Event


def ev(seq: int, type: str, payload: dict[str, object], agent_id: str | None = None) -> Event:
    return Event(run_id="run_x", sequence=seq, timestamp="t", type=type, payload=payload, agent_id=agent_id)


def test_the_header_shows_the_phase_entered_and_never_a_meta_phase_only_listed() -> None:
    view = LiveRunView("wf")
    view.update(ev(1, "phase.started", {"title": "Plan", "source": "meta"}))
    view.update(ev(2, "phase.started", {"title": "Never", "source": "meta"}))
    assert view.state is not None and view.state.current_phase is None
    view.update(ev(3, "agent.queued", {"label": "a", "phase": "Plan"}, "ag_1"))
    view.update(ev(4, "agent.started", {"label": "a", "phase": "Plan"}, "ag_1"))
    assert view.state.current_phase == "Plan"
    view.update(ev(5, "phase.started", {"title": "Adhoc", "source": "agent"}))
    assert view.state.current_phase == "Adhoc"
    assert [p["status"] for p in view.state.phases] == ["running", "pending", "running"]
