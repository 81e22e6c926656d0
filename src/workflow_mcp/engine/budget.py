"""The workflow token budget (profile claude-code/2.1.332, PROFILE-FACTS "budget").

``total`` is ``None`` unless the run was given a target; ``spent`` counts **output tokens only**
(input and cache tokens are recorded for cost reports but never charged). Admission happens before
each agent() call: when ``total > 0 and spent >= total`` the call is refused. Calls already running
finish and still charge. A replayed (cached) call charges its recorded output tokens to ``spent`` so
budget-guarded loops replay exactly as they first ran; ``replayed`` keeps that part apart.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Budget"]


@dataclass
class Budget:
    total: int | None = None
    spent: int = 0
    replayed: int = 0

    def admits(self) -> bool:
        """False when the target is spent: ``total > 0 and spent >= total``."""
        return not (self.total is not None and self.total > 0 and self.spent >= self.total)

    def charge(self, output_tokens: int, *, replayed: bool = False) -> None:
        self.spent += max(0, int(output_tokens))
        if replayed:
            self.replayed += max(0, int(output_tokens))

    def remaining(self) -> float:
        """``inf`` without a target, else ``max(0, total - spent)``."""
        if self.total is None:
            return float("inf")
        return float(max(0, self.total - self.spent))
