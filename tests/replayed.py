"""Reading replayed calls back from a run's events, whichever way they were replayed.

A call the host replays has an ``agent.queued`` and an ``agent.cached`` carrying the delivery
(``turn``) its result reached the workflow in. A call the realm replays by itself (engine/run.py
``_replay_table``) has only its ``agent.cached``, stored as the realm took the record, and its result's
delivery is an ``agent.delivered`` (``turn``, ``agentIds`` in release order)."""

from __future__ import annotations

from workflow_mcp.events import Event

__all__ = ["calls", "interleaved", "released", "released_turns"]


def interleaved(names: str) -> str:
    """A workflow whose calls (one per letter of ``names``, labelled by it) run in one ``parallel()``,
    each continuation in two steps, so its ``trace`` shows whether answers delivered together
    interleaved (``a1 b1 a2 b2``) or ran one after the other (``a1 a2 b1 b2``)."""
    return (
        "export const meta = { name: 'interleaved', description: 'continuations of one delivery' }\n"
        "const trace = []\n"
        "const step = async (name) => {\n"
        "  const r = await agent('ask ' + name, { label: name })\n"
        "  trace.push(name + '1'); await null; trace.push(name + '2'); return r\n"
        "}\n"
        f"await parallel({list(names)!r}.map((name) => () => step(name)))\n"
        "return trace\n"
    )


def _labels(events: list[Event]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if e.agent_id is not None and e.type in ("agent.queued", "agent.cached"):
            out.setdefault(e.agent_id, str(e.payload.get("label")))
    return out


def calls(events: list[Event]) -> list[str]:
    """The label of every agent() call the run recorded, once each, in call order."""
    seen: dict[str, str] = {}
    for e in events:
        if e.agent_id is not None and e.type in ("agent.queued", "agent.cached") and e.agent_id not in seen:
            seen[e.agent_id] = str(e.payload.get("label"))
    return list(seen.values())


def released(events: list[Event]) -> list[tuple[str, int]]:
    """``(label, turn)`` of each replayed result, in the order the results reached the workflow."""
    labels = _labels(events)
    out: list[tuple[str, int]] = []
    for e in events:
        if e.type == "agent.cached" and "turn" in e.payload:
            out.append((str(e.payload.get("label")), int(e.payload["turn"])))
        elif e.type == "agent.delivered":
            out.extend((labels[a], int(e.payload["turn"])) for a in e.payload["agentIds"])
    return out


def released_turns(events: list[Event]) -> dict[str, int]:
    """Label -> the delivery (``turn``) each replayed result reached the workflow in."""
    return dict(released(events))
