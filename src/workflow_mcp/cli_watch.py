"""``workflow-mcp runs watch RUN_ID``: one run, live, on a terminal (rich ``Live``).

It shows the run's phases with a progress bar each (calls done of calls seen), the calls running now
with a clock that keeps going between events, how many wait in the queue, the newest log lines, the
tokens so far, and the final status. Everything comes from the service: the run's projected state
(:meth:`WorkflowService.status`) to start with, then its durable events after that state's
``lastSequence`` (:meth:`WorkflowService.wait_events`), folded with the same
:class:`~workflow_mcp.state.StateProjector` — so the view and ``runs show`` always agree, whichever
process runs the run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .service import WorkflowService
from .state import TERMINAL, RunState, StateProjector
from .timeline import Timeline

__all__ = ["LiveRunView", "RunWatch", "watch_run"]

_FINISHED = ("completed", "failed", "cancelled", "cached")
_SHOWN_RUNNING = 12
_SHOWN_LOGS = 8
_FRAME_S = 0.25


class RunWatch:
    """The screen of one run: :meth:`fold` events into it, :meth:`render` it (a rich renderable)."""

    def __init__(self, state: RunState, timeline: Timeline) -> None:
        self.state = state
        self.projector = StateProjector(state)
        self.timeline = timeline

    def fold(self, events: list[Any]) -> None:
        self.projector.apply_all(events)
        self.timeline.fold(events, until=self.state.last_sequence)

    def render(self, now_ms: int | None = None) -> Any:
        from rich.console import Group
        from rich.markup import escape
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        state = self.state
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        name = str(state.workflow.get("name") or "run")
        start = self.timeline.run_started
        end = self.timeline.run_ended if state.status in TERMINAL else None
        elapsed = f"{((end or now) - start) / 1000:.1f} s" if start is not None else "—"
        head = Text.assemble(
            (name, "bold"), "  ", (state.run_id, "dim"), "  ", (state.status, _tone(state.status))
        )
        head.append(f"  {elapsed}")
        phases = Table(title="Phases", title_justify="left", box=None, padding=(0, 1))
        phases.add_column("phase")
        phases.add_column("status")
        phases.add_column("progress", width=24)
        phases.add_column("done", justify="right")
        by_phase: dict[str, list[str]] = {}
        for agent in state.agents.values():
            by_phase.setdefault(agent.phase or "(no phase)", []).append(agent.state)
        titles = [p["title"] for p in state.phases] + [
            t for t in by_phase if t not in {p["title"] for p in state.phases}
        ]
        status_of = {p["title"]: p["status"] for p in state.phases}
        for title in titles:
            states = by_phase.get(title, [])
            done = sum(1 for s in states if s in _FINISHED)
            phases.add_row(
                escape(title),
                status_of.get(title, ""),
                ProgressBar(total=max(1, len(states)), completed=done, width=24),
                f"{done}/{len(states)}",
            )
        counts = state.counts()
        running = [a for a in state.agents.values() if a.state == "running"]
        lines: list[Any] = [head, phases]
        if running:
            table = Table(title="Running", title_justify="left", box=None, padding=(0, 1))
            table.add_column("agent")
            table.add_column("phase")
            table.add_column("for", justify="right")
            for agent in running[:_SHOWN_RUNNING]:
                times = self.timeline.agents.get(agent.agent_id)
                since = times.started if times is not None else None
                clock = f"{(now - since) / 1000:.1f} s" if since is not None else "—"
                table.add_row(escape(agent.label or agent.agent_id), escape(agent.phase or ""), clock)
            if len(running) > _SHOWN_RUNNING:
                table.add_row(f"(+{len(running) - _SHOWN_RUNNING} more)", "", "")
            lines.append(table)
        usage = state.token_usage
        lines.append(
            Text(
                f"queued: {counts['queued']}  running: {counts['running']}  done: {counts['completed']}  "
                f"failed: {counts['failed']}  cancelled: {counts['cancelled']}  replayed: {counts['cached']}"
            )
        )
        lines.append(
            Text(
                f"tokens: {usage['input']:,} in / {usage['output']:,} out (+{usage['replayedOutput']:,} replayed)"
            )
        )
        for line in state.logs[-_SHOWN_LOGS:]:
            lines.append(Text("│ " + line[:200], style="dim"))
        if state.status in TERMINAL:
            final = f"run {state.status}"
            if state.paused_reason:
                final += f": {state.paused_reason}"
            if state.error is not None:
                final += f": {state.error.get('message', '')}"
            lines.append(Text(final, style=_tone(state.status)))
            if state.status != "completed":
                lines.append(Text(f"resume it with: workflow-mcp resume {state.run_id}"))
        return Group(*lines)


class LiveRunView:
    """What ``workflow-mcp run`` shows on a terminal (``--events progress``): the :class:`RunWatch`
    screen of the run it executes, on stderr, fed with each event as the service commits it
    (:meth:`update`) and redrawn four times a second so the clocks keep going between events."""

    def __init__(self, name: str) -> None:
        from rich.console import Console

        self.name = name
        self.console = Console(stderr=True)
        self.watch: RunWatch | None = None
        self._live: Any = None
        self._lock = threading.Lock()  # rich redraws from its own thread while events are folded

    @property
    def state(self) -> RunState | None:
        """The run's state so far (``None`` before its first event)."""
        return self.watch.state if self.watch is not None else None

    def _render(self) -> Any:
        from rich.text import Text

        with self._lock:
            return self.watch.render() if self.watch is not None else Text(f"{self.name}: starting")

    def update(self, event: Any) -> None:
        with self._lock:
            if self.watch is None:
                self.watch = RunWatch(RunState(run_id=event.run_id), Timeline())
            self.watch.fold([event])

    def start(self) -> None:
        from rich.live import Live

        self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4)
        self._live.start()

    @property
    def showing(self) -> bool:
        """Whether the view is on the terminal (between :meth:`start` and :meth:`stop`)."""
        return self._live is not None

    def stop(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None


def _tone(status: str) -> str:
    return {"completed": "green", "failed": "red", "interrupted": "red", "paused": "yellow"}.get(
        status, "cyan"
    )


async def watch_run(service: WorkflowService, run_id: str, *, console: Any = None) -> RunState:
    """Show run ``run_id`` live on ``console`` (default: stdout) until it ends; returns its final state.

    Raises:
        RunNotFoundError: unknown run id.
    """
    from rich.console import Console
    from rich.live import Live

    state = await asyncio.to_thread(service.status, run_id)
    after = state.last_sequence
    events = await asyncio.to_thread(service.events, run_id, 0, after)
    watch = RunWatch(state, Timeline().fold(events, until=after))
    out = console or Console()
    with Live(watch.render(), console=out, refresh_per_second=4, transient=False) as live:
        while state.status not in TERMINAL:
            batch = await service.wait_events(run_id, state.last_sequence, 500, wait_ms=int(_FRAME_S * 1000))
            watch.fold(batch)
            live.update(watch.render())
        live.update(watch.render())
    if not out.is_terminal:
        # Off a terminal Live prints its last frame once, without ending its last line.
        out.line()
    return state
