"""Human checkpoints: a provider's permission request that the policy leaves to a human
(``approvals = "ask"``) becomes a durable checkpoint of the run.

A checkpoint's id is derived from the agent call's v2 journal key, the attempt, the request's
place in that attempt and what it asks, so the same request in a resumed run has the same id. A
checkpoint is answered, in this order, by a decision the run was given or inherited
(:class:`CheckpointReply`: ``checkpointReplies`` on resume, or a ``checkpoint.resolved`` event of
the run it resumes — replayed without asking), by a client waiting on the run (an MCP
elicitation), or not at all: the run then pauses with reason ``checkpoint_required`` and a
non-secret ``checkpointContext``. Every decision is journaled as a ``checkpoint.resolved`` event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import InvalidInputError
from ..events import Event
from ..providers.base import CheckpointAsk

__all__ = [
    "DECISIONS",
    "CheckpointAsker",
    "CheckpointReply",
    "checkpoint_id",
    "journaled_decisions",
    "parse_checkpoint_replies",
]

Decision = Literal["allow", "deny"]
DECISIONS: Final[tuple[Decision, ...]] = ("allow", "deny")

CheckpointAsker = Callable[[Mapping[str, Any]], Awaitable[bool | None]]
"""Asks a human about one checkpoint (its ``checkpointContext``): ``True`` allow, ``False`` deny,
``None`` no answer (declined, cancelled, timed out: the run pauses instead). Never raises."""


@dataclass(frozen=True)
class CheckpointReply:
    """A decision known before the checkpoint is reached: ``allow`` or not, and its ``source``
    (``reply``: given on this resume; ``journal``: recorded by the run this one resumes)."""

    allow: bool
    source: Literal["reply", "journal"] = "reply"


def checkpoint_id(key: str, attempt: int, ordinal: int, ask: CheckpointAsk) -> str:
    """``cp_`` and 16 hex digits: stable for the same request at the same place of the same call."""
    what = json.dumps([key, attempt, ordinal, ask.to_json()], sort_keys=True, ensure_ascii=False)
    return "cp_" + hashlib.sha256(what.encode()).hexdigest()[:16]


def parse_checkpoint_replies(raw: Mapping[str, Any] | Iterable[str]) -> dict[str, CheckpointReply]:
    """``{"cp_…": "allow" | "deny"}`` or ``["cp_…=allow", …]`` as replies.

    Raises:
        InvalidInputError: a reply that is not ``ID=allow`` or ``ID=deny``.
    """
    pairs: list[tuple[str, Any]]
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    else:
        pairs = []
        for item in raw:
            cid, sep, value = item.partition("=")
            if not sep:
                raise InvalidInputError(f"checkpoint reply {item!r}: write it as ID=allow or ID=deny")
            pairs.append((cid.strip(), value.strip()))
    replies: dict[str, CheckpointReply] = {}
    for cid, value in pairs:
        if not isinstance(cid, str) or not cid.startswith("cp_"):
            raise InvalidInputError(
                f"checkpoint reply for {cid!r}: not a checkpoint id (they start with cp_; see the paused "
                "run's checkpointContext.checkpointId)"
            )
        if value not in DECISIONS:
            raise InvalidInputError(f"checkpoint reply for {cid}: must be allow or deny, got {value!r}")
        replies[cid] = CheckpointReply(value == "allow")
    return replies


def journaled_decisions(events: Iterable[Event]) -> dict[str, CheckpointReply]:
    """The decisions a run's ``checkpoint.resolved`` events recorded, for its resume to replay."""
    decisions: dict[str, CheckpointReply] = {}
    for event in events:
        if event.type != "checkpoint.resolved":
            continue
        cid, decision = event.payload.get("checkpointId"), event.payload.get("decision")
        if isinstance(cid, str) and decision in DECISIONS:
            decisions[cid] = CheckpointReply(decision == "allow", "journal")
    return decisions
