"""The live progress view of ``workflow-mcp run`` on a terminal (rich): phases, agents, logs.

The counts are the projection's (``state.py``, the same fold ``runs show`` uses), so the view and the
stored run agree: a call stopped because its run was cancelled or paused is counted as cancelled, not
failed.
"""

from __future__ import annotations

import time
from typing import Any

from .events import Event
from .state import TERMINAL, RunState, StateProjector

__all__ = ["ProgressView"]


class ProgressView:
    """Renders events as they come: a header with counts and the current phase, then the log tail."""

    def __init__(self, name: str) -> None:
        from rich.console import Console

        self.name = name
        self.console = Console(stderr=True)
        self._projector: StateProjector | None = None
        self.logs: list[str] = []
        self.labels: dict[str, str] = {}  # running agentId -> label
        self.started = time.monotonic()
        self._live: Any = None

    @property
    def state(self) -> RunState | None:
        """The run's state so far (``None`` before its first event)."""
        return self._projector.state if self._projector is not None else None

    def _render(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        state = self.state
        c = state.counts() if state is not None else RunState(run_id="").counts()
        table = Table.grid(padding=(0, 1))
        # Workflow text is shown as text, never interpreted as markup.
        head = f"[bold]{escape(self.name)}[/bold]"
        if state is not None:
            head += f"  [dim]{state.run_id}[/dim]"
            if state.current_phase:
                head += f"  phase: [cyan]{escape(state.current_phase)}[/cyan]"
        table.add_row(head)
        output = state.token_usage["output"] if state is not None else 0
        table.add_row(
            f"agents: [yellow]{c['running']} running[/yellow], [green]{c['completed']} done[/green], "
            f"{c['cached']} replayed, [red]{c['failed']} failed[/red], {c['cancelled']} cancelled"
        )
        table.add_row(
            f"{output:,} output tokens  ·  {time.monotonic() - self.started:.1f} s  ·  "
            f"{state.status if state is not None else 'running'}"
        )
        running = list(self.labels.values())
        if running:
            more = f" (+{len(running) - 4} more)" if len(running) > 4 else ""
            table.add_row("[dim]running:[/dim] " + escape(", ".join(running[:4])) + more)
        for line in self.logs[-8:]:
            table.add_row(f"[dim]│[/dim] {line}")  # already escaped when stored
        return table

    def start(self) -> None:
        from rich.live import Live

        self._live = Live(self._render(), console=self.console, refresh_per_second=8, transient=False)
        self._live.start()

    @property
    def showing(self) -> bool:
        """Whether the live view is on the terminal (between :meth:`start` and :meth:`stop`)."""
        return self._live is not None

    def stop(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
            self._live = None

    def update(self, event: Event) -> None:
        from rich.markup import escape

        if self._projector is None:
            self._projector = StateProjector(RunState(run_id=event.run_id))
        self._projector.apply(event)
        t = event.type
        if t == "agent.started":
            self.labels[event.agent_id or ""] = str(event.payload.get("label", ""))[:40]
        elif t in ("agent.completed", "agent.failed"):
            self.labels.pop(event.agent_id or "", None)
        elif t == "log":
            self.logs.append(escape(str(event.payload.get("message", ""))))
        elif t == "warning":
            self.logs.append("[yellow]warning:[/yellow] " + escape(str(event.payload.get("message", ""))))
        if self._projector.state.status in TERMINAL:
            self.labels.clear()
        if self._live is not None:
            self._live.update(self._render())
