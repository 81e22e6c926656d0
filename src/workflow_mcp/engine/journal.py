"""Journal replay: deciding which agent() calls of a resumed run reuse a recorded result.

Every agent call carries two identities computed in the realm:

- ``key``: Claude's chained v2 cache key (``v2:`` + sha256 over the previous key, the prompt and the
  canonical execution-affecting options; parallel/pipeline slots fork and join the chain). Profile
  claude-code/2.1.332, verified byte-for-byte against Claude's ``journal.jsonl``.
- ``contentKey``: sha256 over the prompt and the same canonical options, without the chain.

Two policies:

- ``content`` (default): a call is reused when the same content key occurs again; the n-th
  occurrence in the new run reuses the n-th recorded result (recorded call order), whatever order a
  fan-out completes in.
- ``prefix``: Claude's rule: the longest unchanged prefix in call order replays; after the first
  miss every later call runs live, even if an identical record exists.

Both: ``null`` results are never reused, and a call that started without a result runs again.
Both release replayed results in the order the original run completed them
(:mod:`~workflow_mcp.engine.release`; each record's ``completed`` rank), in the realm deliveries the
original run made (each record's ``turn``).

Records imported from another tool (Claude Code's ``journal.jsonl``, see ``claude_import``) may have no
content key (Claude does not record the options a call was made with): ``content`` then matches them by
v2 key, in any order. They are ``read_only``; one whose call had side effects (an isolated worktree) is
reused only when the ``Replay`` is built with ``allow_side_effects=True``.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..definitions.profile import MAX_VALUE_DEPTH
from ..events import Event
from ..providers.base import ImageInput

__all__ = [
    "MAX_VALUE_DEPTH",
    "JournalRecord",
    "Replay",
    "ResumePolicy",
    "content_key",
    "delivery_turns",
    "json_value_problem",
    "records_from_events",
]

ResumePolicy = Literal["content", "prefix"]


# The deepest recorded value replayed: the realm bounds every value it hands the host at this depth
# (worker.js gets it in its start message), so a deeper one was never produced by a run and is not
# handed back to one.


def json_value_problem(value: Any, max_depth: int = MAX_VALUE_DEPTH) -> str | None:
    """Why ``value`` (as ``json.loads`` made it) cannot be replayed into the realm or stored, or
    ``None``: nested deeper than ``max_depth``, a non-finite number (``NaN``/``Infinity``, which JSON
    does not allow) or a lone UTF-16 surrogate (no UTF-8 form) in a string or key. Iterative."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _has_lone_surrogate(item):
                return "it holds a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape), which has no UTF-8 form"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                name = "NaN" if item != item else ("Infinity" if item > 0 else "-Infinity")
                return f"it holds {name}, which JSON does not allow"
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                return f"it is nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and _has_lone_surrogate(key):
                        return "a key holds a lone UTF-16 surrogate, which has no UTF-8 form"
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def records_from_events(events: list[Event], source_run_id: str = "") -> list[JournalRecord]:
    """The reusable journal of a finished or interrupted run: every ``agent.completed`` (or replayed
    ``agent.cached``) with its result, in the order the calls were made (a call replayed in the realm
    has no ``agent.queued``: its ``agent.cached`` marks its place), each with the delivery
    (``turn``) its result reached the workflow in (:func:`delivery_turns`)."""
    queued_order: dict[str, int] = {}
    records: list[tuple[int, JournalRecord]] = []
    turns = delivery_turns(events)
    for e in events:
        if e.type == "agent.queued" and e.agent_id is not None:
            queued_order[e.agent_id] = len(queued_order)
        elif e.type in ("agent.completed", "agent.cached") and e.agent_id is not None:
            if e.type == "agent.cached" and e.agent_id not in queued_order:
                queued_order[e.agent_id] = len(queued_order)
            p = e.payload
            if p.get("outcome", "completed") != "completed":
                continue
            records.append(
                (
                    queued_order.get(e.agent_id, len(queued_order)),
                    JournalRecord(
                        key=str(p.get("key", "")),
                        content_key=str(p.get("contentKey", "")),
                        agent_id=e.agent_id,
                        result=p.get("result"),
                        tokens={k: int(v) for k, v in dict(p.get("tokenUsage") or {}).items()},
                        label=str(p.get("label", "")),
                        side_effects=bool(p.get("sideEffects", False)),
                        source_run_id=str(p.get("fromRunId") or source_run_id or e.run_id),
                        turn=turns.get(e.agent_id, -1),
                    ),
                )
            )
    records.sort(key=lambda pair: pair[0])
    return [r for _, r in records]


def _turn_of(payload: Mapping[str, Any]) -> int:
    turn = payload.get("turn")
    return turn if type(turn) is int and turn >= 0 else -1


def delivery_turns(events: Iterable[Event]) -> dict[str, int]:
    """Agent id -> the realm delivery (``turn``) each completed or replayed call of a run reached its
    workflow in, from its ``agent.completed``/``agent.cached`` event or, for a call replayed in the
    realm, the ``agent.delivered`` naming it (calls without one are left out). Raises nothing: a
    malformed ``turn`` or ``agentIds`` is left out too."""
    turns: dict[str, int] = {}
    for e in events:
        if e.type in ("agent.completed", "agent.cached") and e.agent_id is not None:
            turn = _turn_of(e.payload)
            if turn >= 0:
                turns[e.agent_id] = turn
        elif e.type == "agent.delivered":
            turn = _turn_of(e.payload)
            ids = e.payload.get("agentIds")
            if turn >= 0 and isinstance(ids, list):
                for agent_id in ids:
                    if isinstance(agent_id, str):
                        turns[agent_id] = turn
    return turns


def images_key(images: Sequence[ImageInput]) -> str:
    """``i1:`` + hex(sha256) over each image's MIME type and bytes, in order; ``""`` for none. A run's
    image attachments reach every call, so this suffixes each call's journal and content keys: a
    resume with other images never takes a cached result made with these."""
    if not images:
        return ""
    digest = hashlib.sha256()
    for image in images:
        digest.update(image.mime_type.encode("utf-8") + b"\0" + len(image.data).to_bytes(8, "big"))
        digest.update(image.data)
    return "i1:" + digest.hexdigest()


def content_key(prompt: str, canon: str) -> str:
    """``c1:`` + hex(sha256(prompt + "\\0" + canon)) over UTF-8."""
    return "c1:" + hashlib.sha256((prompt + "\0" + canon).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class JournalRecord:
    """One completed call of an earlier run. ``result`` is the JSON value agent() resolved to;
    ``completed`` its rank in the order that run completed its calls (``-1``: unknown), by which a
    resumed run releases replayed results (:mod:`~workflow_mcp.engine.release`); ``turn`` the realm
    delivery its answer reached the workflow in (the ``turn`` of its ``agent.completed`` or
    ``agent.cached`` event; ``-1``: unknown, so it is replayed in a delivery of its own)."""

    key: str
    content_key: str
    agent_id: str
    result: Any
    tokens: dict[str, int]
    label: str = ""
    side_effects: bool = False
    source_run_id: str = ""
    read_only: bool = False
    completed: int = -1
    turn: int = -1


class Replay:
    """Lookup of recorded results for one resumed run. Not thread-safe; one per run.

    ``notes`` are diagnostics about where the records came from (a Claude journal's skipped lines);
    the run emits each as a ``warning`` event when it starts."""

    def __init__(
        self,
        records: Iterable[JournalRecord],
        policy: ResumePolicy = "content",
        *,
        allow_side_effects: bool = False,
        notes: Iterable[str] = (),
    ) -> None:
        self.policy: ResumePolicy = policy
        self.notes = tuple(notes)  # diagnostics about the records (e.g. skipped journal lines)
        self._by_key: dict[str, JournalRecord] = {}
        self._by_content: dict[str, deque[JournalRecord]] = {}
        self._by_key_only: dict[str, deque[JournalRecord]] = {}
        self.ranks: list[int] = []  # completion ranks of the reusable records (release order)
        self._reusable: list[JournalRecord] = []
        self._realm_rows: list[list[Any]] | None = None
        for r in records:
            if r.result is None:
                continue  # null results are never reused
            if r.read_only and r.side_effects and not allow_side_effects:
                continue  # an imported worktree call: its changes live outside our runs
            self._reusable.append(r)
            if r.key:
                self._by_key.setdefault(r.key, r)
            if r.content_key:
                self._by_content.setdefault(r.content_key, deque()).append(r)
            elif r.key:
                self._by_key_only.setdefault(r.key, deque()).append(r)
        reachable = (
            list(self._by_key.values())
            if policy == "prefix"
            else [r for q in (*self._by_content.values(), *self._by_key_only.values()) for r in q]
        )
        self.ranks = [r.completed for r in reachable if r.completed >= 0]
        self._missed = False
        self.first_miss_label: str | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._by_key)

    #: A recorded result longer than this (JSON text) is not sent to the realm (:meth:`realm_rows`).
    REALM_RESULT_MAX = 256 * 1024

    def realm_rows(self) -> list[list[Any]]:
        """One row per :meth:`reachable` record, as the realm's replay table takes it (engine/run.py
        ``_replay_table``): ``[index, key, content key, completion rank, original delivery, output
        tokens, usable, result as JSON text]``. ``usable``: a call without a schema could replay it (a
        string, no NaN, lone surrogate or deeper nesting than ``MAX_VALUE_DEPTH``); the text is
        ``None`` when it is not, or longer than :attr:`REALM_RESULT_MAX`. Computed once (a resume
        computes it while its worker starts). Read before any :meth:`take`."""
        if self._realm_rows is None:
            rows: list[list[Any]] = []
            for index, record in enumerate(self.reachable()):
                result = record.result
                usable = isinstance(result, str) and json_value_problem(result) is None
                text = json.dumps(result, ensure_ascii=False) if usable else None
                if text is not None and len(text) > self.REALM_RESULT_MAX:
                    text = None
                tokens = max(0, int(record.tokens.get("output", 0)))
                rows.append(
                    [
                        index,
                        record.key,
                        record.content_key,
                        record.completed,
                        record.turn,
                        tokens,
                        usable,
                        text,
                    ]
                )
            self._realm_rows = rows
        return self._realm_rows

    def reachable(self) -> list[JournalRecord]:
        """The records a call can take under this policy, in the order :meth:`take` queues them:
        under ``prefix`` the first record of each v2 key; under ``content`` every record with a
        content key or a v2 key (a content key's n-th occurrence takes the n-th of them). Their
        completion ranks are :attr:`ranks`. Read before any :meth:`take`."""
        if self.policy == "prefix":
            return list(self._by_key.values())
        return [r for r in self._reusable if r.content_key or r.key]

    def take(self, key: str, ckey: str, label: str = "") -> JournalRecord | None:
        """The record to reuse for this call, or ``None`` when it must run live."""
        hit: JournalRecord | None = None
        if self.policy == "prefix":
            if not key:
                # No v2 key: a call Claude refuses before keying it (an invalid tool list). It is
                # outside the chain, so it never replays and never ends the replayed prefix.
                self.misses += 1
                return None
            if not self._missed:
                hit = self._by_key.get(key)
        else:
            queue = self._by_content.get(ckey) or (self._by_key_only.get(key) if key else None)
            if queue:
                hit = queue.popleft()
        if hit is None:
            if not self._missed:
                self._missed = True
                self.first_miss_label = label
            self.misses += 1
        else:
            self.hits += 1
        return hit

    def refuse(self, label: str = "") -> None:
        """The record :meth:`take` just returned cannot be replayed (its result is unusable): count
        the call as a miss, so under ``prefix`` every later call runs live too."""
        self.hits -= 1
        self.misses += 1
        if not self._missed:
            self._missed = True
            self.first_miss_label = label
