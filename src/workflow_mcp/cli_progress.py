"""The live progress view of ``workflow-mcp run`` on a terminal (rich): phases, agents, logs."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ProgressView"]


class ProgressView:
    """Renders events as they come: a header with counts and the current phase, then the log tail."""

    def __init__(self, name: str) -> None:
        from rich.console import Console

        self.name = name
        self.console = Console(stderr=True)
        self.phase: str | None = None
        self.running = 0
        self.done = 0
        self.cached = 0
        self.failed = 0
        self.logs: list[str] = []
        self.labels: dict[str, str] = {}  # running agentId -> label
        self.output_tokens = 0
        self.started = time.monotonic()
        self.status = "running"
        self.run_id = ""
        self._live: Any = None

    def _render(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        table = Table.grid(padding=(0, 1))
        # Workflow text is shown as text, never interpreted as markup.
        head = f"[bold]{escape(self.name)}[/bold]"
        if self.run_id:
            head += f"  [dim]{self.run_id}[/dim]"
        if self.phase:
            head += f"  phase: [cyan]{escape(self.phase)}[/cyan]"
        table.add_row(head)
        table.add_row(
            f"agents: [yellow]{self.running} running[/yellow], [green]{self.done} done[/green], "
            f"{self.cached} replayed, [red]{self.failed} failed[/red]  ·  {self.output_tokens:,} output tokens  ·  "
            f"{time.monotonic() - self.started:.1f} s  ·  {self.status}"
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

    def stop(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
            self._live = None

    def update(self, event: Any) -> None:
        from rich.markup import escape

        t = event.type
        self.run_id = event.run_id
        if t == "phase.started":
            if event.payload.get("source") != "meta":  # meta phases are listed, not entered
                self.phase = str(event.payload.get("title"))
        elif t == "agent.started":
            self.running += 1
            if isinstance(event.payload.get("phase"), str):
                self.phase = str(event.payload["phase"])
            self.labels[event.agent_id or ""] = str(event.payload.get("label", ""))[:40]
        elif t == "agent.completed":
            self.running -= 1
            self.done += 1
            self.labels.pop(event.agent_id or "", None)
            self.output_tokens += int((event.payload.get("tokenUsage") or {}).get("output", 0))
        elif t == "agent.failed":
            self.running -= 1
            self.failed += 1
            self.labels.pop(event.agent_id or "", None)
        elif t in ("run.completed", "run.failed", "run.cancelled"):
            self.status = t.split(".")[1]
        elif t == "agent.cached":
            self.cached += 1
        elif t == "log":
            self.logs.append(escape(str(event.payload.get("message", ""))))
        elif t == "warning":
            self.logs.append("[yellow]warning:[/yellow] " + escape(str(event.payload.get("message", ""))))
        if self._live is not None:
            self._live.update(self._render())
