"""Replay in the realm (engine/run.py ``_replay_table``, worker.js "Replay in the realm"): a resume whose
Node worker answers replayed calls itself decides exactly what the host's own replay decides.

Each case runs a workflow, then resumes it twice from the same run — once with the worker replaying
by itself, once with it handing every call to the host (``RealmWorker.replays_locally`` off) — and
holds both resumes to the same result, the same calls in the same order, the same results handed to
the workflow in the same deliveries, the same journal, and a resume of each resume to the same again.
Real Node worker, real SQLite file, fake provider."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from replayed import calls, interleaved, released
from workflow_mcp import WorkflowService
from workflow_mcp.engine.journal import ResumePolicy
from workflow_mcp.events import Event
from workflow_mcp.realm.messages import Released, Took
from workflow_mcp.realm.worker import RealmWorker
from workflow_mcp.service import ProviderChoice, RunLimits, RunOverrides
from workflow_mcp.store import SqliteStore

from helpers import arun

# Two-step continuations: answers delivered together interleave (a1 b1 a2 b2), apart they do not.
INTERLEAVED = interleaved("abcde")
# Completion order decides what later prompts say.
PIPELINE = (
    "export const meta = { name: 'pipe', description: 'order-dependent prompts' }\n"
    "const seen = []\n"
    "const r = await pipeline(['x', 'y', 'z'],\n"
    "  async (item) => { const v = await agent('inspect ' + item, { label: 'inspect:' + item }); seen.push(item); return v },\n"
    "  async (v) => agent('verify ' + v + ' after ' + seen.join(','), { label: 'verify' }))\n"
    "return { r, seen }\n"
)
# The same prompt, several times, answered differently: the n-th occurrence takes the n-th record.
DUPLICATES = (
    "export const meta = { name: 'dice', description: 'one prompt, many answers' }\n"
    "const rolls = []\n"
    "for (let i = 0; i < 3; i++) rolls.push(await agent('roll'))\n"
    "const fan = await parallel([1, 2, 3, 4].map(() => () => agent('roll', { label: 'fan' })))\n"
    "return { rolls, fan, last: await agent('sum ' + rolls.concat(fan).join('+')) }\n"
)
# Budget-guarded: replayed calls charge their recorded tokens, so the loop stops where it did.
BUDGETED = (
    "export const meta = { name: 'budgeted', description: 'stops when the budget is spent' }\n"
    "let n = 0\n"
    "while (budget.remaining() > 0 && n < 50) { await agent('step ' + n, { label: 'step', phase: 'Loop' }); n++ }\n"
    "const [x, y] = await parallel([() => agent('x'), () => agent('y')])\n"
    "return { n, spent: budget.spent(), x, y }\n"
)
# A call with an option the realm does not judge (a model): the realm hands its replay to the host.
HANDED_BACK = (
    "export const meta = { name: 'handback', description: 'plain calls, then one with options' }\n"
    "const first = await parallel(['p', 'q', 'r'].map((x) => () => agent('plain ' + x, { label: x })))\n"
    "const chosen = await agent('pick one of ' + first.join(','), { label: 'pick', model: 'sonnet' })\n"
    "const rest = await parallel(['s', 't'].map((x) => () => agent('after ' + x + ' ' + chosen, { label: x })))\n"
    "return { first, chosen, rest }\n"
)
# Long prompts, a secret where the preview ends: the host gets only the start the preview is made of.
LONG = (
    "export const meta = { name: 'long', description: 'long prompts' }\n"
    "const p = (i) => 'x'.repeat(290 + i) + ' sk-abcdefghijklmnopqrstuvwxyz0123 ' + 'y'.repeat(5000)\n"
    "return await parallel([0, 5, 10, 300].map((i) => () => agent(p(i), { label: 'long' + i })))\n"
)
# The call cap (maxAgents): the realm cannot know the host's count near it, so it hands over there.
CAPPED = (
    "export const meta = { name: 'capped', description: 'more calls than the cap' }\n"
    "const out = []\n"
    "for (let i = 0; i < 6; i++) { try { out.push(await agent('c' + i)) } catch (e) { out.push('refused') } }\n"
    "return out\n"
)
SCRIPTS: dict[str, dict[str, Any]] = {
    "interleaved": {
        "rules": [
            {"match": {"label": "a"}, "respond": {"echo": True, "delayMs": 60}},
            {"match": {"label": "c"}, "respond": {"echo": True, "delayMs": 30}},
        ],
        "default": {"echo": True},
    },
    "pipeline": {
        "rules": [{"match": {"label": "inspect:x"}, "respond": {"echo": True, "delayMs": 80}}],
        "default": {"echo": True},
    },
    "duplicates": {
        "rules": [
            {
                "match": {"prompt": "^roll$"},
                "respond": {
                    "sequence": [
                        {"text": "1"},
                        {"text": "2"},
                        {"text": "3"},
                        {"text": "4", "delayMs": 60},
                        {"text": "5"},
                        {"text": "6", "delayMs": 30},
                        {"text": "7"},
                    ]
                },
            }
        ],
        "default": {"echo": True},
    },
    "budgeted": {"default": {"echo": True, "tokens": {"input": 5, "output": 10}}},
    "capped": {"default": {"echo": True}},
    "long": {"default": {"text": "ok"}},
    "handback": {
        "rules": [{"match": {"label": "q"}, "respond": {"echo": True, "delayMs": 50}}],
        "default": {"echo": True},
    },
}
SOURCES = {
    "interleaved": INTERLEAVED,
    "pipeline": PIPELINE,
    "duplicates": DUPLICATES,
    "budgeted": BUDGETED,
    "handback": HANDED_BACK,
    "capped": CAPPED,
    "long": LONG,
}
# What answers a call that runs live in a resume: as a model would, after the replayed results (a live
# answer is handed over when it arrives, not in the original order, on either path).
LIVE = {"default": {"text": "LIVE", "delayMs": 300}}
LIMITS = {"budgeted": RunLimits(token_budget=35), "capped": RunLimits(max_agents=4)}


@dataclasses.dataclass
class Resumed:
    run_id: str
    result: Any
    events: list[Event]
    journal: list[tuple[str, str, str, str, str | None]]

    @property
    def live(self) -> list[str]:
        return [str(e.payload.get("label")) for e in self.events if e.type == "agent.started"]

    @property
    def in_realm(self) -> bool:
        return any(e.type == "agent.delivered" for e in self.events)

    def deliveries(self) -> list[tuple[str, int]]:
        """What reached the workflow, in order, each delivery numbered by first appearance (the
        numbers themselves are each run's own)."""
        order: dict[int, int] = {}
        out = []
        for label, turn in released(self.events):
            out.append((label, order.setdefault(turn, len(order))))
        return out


def _journal(service: WorkflowService, run_id: str) -> list[tuple[str, str, str, str, str | None]]:
    return [(r.label, r.key, r.content_key, r.status, r.result_json) for r in service.store.journal(run_id)]


async def _resume(
    service: WorkflowService,
    run_id: str,
    *,
    in_realm: bool,
    policy: ResumePolicy = "content",
    path: Path | None = None,
) -> Resumed:
    """Resume ``run_id`` with the realm replaying by itself or not; ``path``: from that file as it is
    now (``start`` with ``resume_from``) instead of the run's stored source."""
    RealmWorker.replays_locally = in_realm
    try:
        if path is None:
            overrides = RunOverrides(provider=ProviderChoice("fake", LIVE), policy=policy)
            handle = await service.resume(run_id, overrides)
        else:
            handle = await service.start(str(path), provider=ProviderChoice("fake", LIVE), resume_from=run_id)
        result = await handle.result()
    finally:
        RealmWorker.replays_locally = True
    return Resumed(handle.run_id, result, service.events(handle.run_id), _journal(service, handle.run_id))


def _previews(events: list[Event]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for e in events:
        if e.type in ("agent.queued", "agent.cached") and "promptPreview" in e.payload:
            out.setdefault(str(e.payload.get("label")), e.payload["promptPreview"])
    return out


def _same(on: Resumed, off: Resumed) -> None:
    assert on.result == off.result
    assert _previews(on.events) == _previews(off.events)
    assert calls(on.events) == calls(off.events)
    assert on.deliveries() == off.deliveries()
    assert on.journal == off.journal
    assert on.live == off.live


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("policy", ["content", "prefix"])
def test_a_resume_replayed_in_the_realm_decides_what_the_hosts_replay_decides(
    name: str, policy: ResumePolicy, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.js"
    path.write_text(SOURCES[name])
    store = SqliteStore(tmp_path / "state.db")
    service = WorkflowService(store, cwd=str(tmp_path))

    async def go() -> tuple[Any, Resumed, Resumed, Resumed, Resumed]:
        try:
            first = await service.start(
                str(path), provider=ProviderChoice("fake", SCRIPTS[name]), limits=LIMITS.get(name)
            )
            result = await first.result()
            on = await _resume(service, first.run_id, in_realm=True, policy=policy)
            off = await _resume(service, first.run_id, in_realm=False, policy=policy)
            on2 = await _resume(service, on.run_id, in_realm=True, policy=policy)
            off2 = await _resume(service, off.run_id, in_realm=False, policy=policy)
            return result, on, off, on2, off2
        finally:
            await service.shutdown()
            store.close()

    result, on, off, on2, off2 = arun(go())
    assert on.in_realm and not off.in_realm
    assert on.result == result and on.live == []
    _same(on, off)
    assert on2.in_realm and on2.result == result and on2.live == []
    _same(on2, off2)


def test_calls_the_realm_cannot_judge_are_handed_to_the_host_with_the_ones_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "handback.js"
    path.write_text(HANDED_BACK)
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))

    async def go() -> tuple[Any, Resumed]:
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPTS["handback"]))
            result = await first.result()
            return result, await _resume(service, first.run_id, in_realm=True)
        finally:
            await service.shutdown()

    result, on = arun(go())
    assert on.result == result and on.live == []
    kinds: dict[str, str] = {}  # each call's first event
    for e in on.events:
        if e.type in ("agent.queued", "agent.cached"):
            kinds.setdefault(str(e.payload.get("label")), e.type)
    # p, q, r were taken in the realm (one event each); pick, s and t went to the host (queued first).
    assert [kinds[x] for x in ("p", "q", "r")] == ["agent.cached"] * 3
    assert [kinds[x] for x in ("pick", "s", "t")] == ["agent.queued"] * 3


def test_a_resume_with_new_calls_runs_them_live_and_replays_the_rest_in_the_realm(tmp_path: Path) -> None:
    path = tmp_path / "interleaved.js"
    path.write_text(INTERLEAVED)
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))

    async def go() -> tuple[Resumed, Resumed]:
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPTS["interleaved"]))
            await first.result()
            # c asks another question now: it runs live, its record is never asked for.
            path.write_text(
                INTERLEAVED.replace("'ask ' + name", "'ask ' + name + (name === 'c' ? ' again' : '')")
            )
            on = await _resume(service, first.run_id, in_realm=True, path=path)
            return on, await _resume(service, first.run_id, in_realm=False, path=path)
        finally:
            await service.shutdown()

    on, off = arun(go())
    assert on.in_realm and on.live == ["c"]
    _same(on, off)


class _OutOfStep(RealmWorker):
    """A worker whose replay messages name the wrong record or a call it never announced (what a broken
    or subverted realm would send)."""

    forge = "took"

    async def receive(self) -> Any:
        msg = await super().receive()
        if isinstance(msg, Took) and self.forge == "took":
            for call in msg.calls:
                call[1] = call[1] + 1
        elif isinstance(msg, Released) and self.forge == "released":
            msg.ids.append(max(msg.ids) + 10_000)
        return msg


@pytest.mark.parametrize(("forge", "named"), [("took", "record"), ("released", "which it never announced")])
def test_a_realm_whose_replay_goes_out_of_step_fails_the_run_naming_it(
    forge: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "dice.js"
    path.write_text(DUPLICATES)
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))
    monkeypatch.setattr(_OutOfStep, "forge", forge)

    async def go() -> tuple[str, list[Event]]:
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPTS["duplicates"]))
            await first.result()
            monkeypatch.setattr(RealmWorker, "spawn", _spawn_out_of_step)
            handle = await service.resume(first.run_id)
            try:
                await handle.result()
            except Exception as exc:  # the run fails; its error names the cause
                return str(exc), service.events(handle.run_id)
            return "", service.events(handle.run_id)
        finally:
            await service.shutdown()

    error, events = arun(go())
    assert "out of step" in error and named in error
    (failed,) = [e for e in events if e.type == "run.failed"]
    assert "the realm's replay is out of step with the host's" in failed.payload["error"]["message"]


def test_a_journal_entry_edited_behind_the_stores_back_runs_its_call_live_either_way(tmp_path: Path) -> None:
    """A record whose result no call without a schema can take (another program rewrote it as an
    object): the realm takes it as the host would, finds it unusable, and the call runs live with the
    host's warning; every other call still replays in the realm."""
    path = tmp_path / "interleaved.js"
    path.write_text(INTERLEAVED)
    db = tmp_path / "state.db"
    service = WorkflowService(SqliteStore(db), cwd=str(tmp_path))

    async def go() -> tuple[Resumed, Resumed]:
        try:
            first = await service.start(str(path), provider=ProviderChoice("fake", SCRIPTS["interleaved"]))
            await first.result()
            with sqlite3.connect(db) as other:
                other.execute(
                    "UPDATE journal SET result_json = '{\"x\": 1}' WHERE run_id = ? AND label = 'b'",
                    (first.run_id,),
                )
            on = await _resume(service, first.run_id, in_realm=True)
            return on, await _resume(service, first.run_id, in_realm=False)
        finally:
            await service.shutdown()

    on, off = arun(go())
    assert on.in_realm and on.live == ["b"]
    warnings = [str(e.payload.get("message")) for e in on.events if e.type == "warning"]
    assert any("[b] the recorded result is not replayed" in w for w in warnings), warnings
    _same(on, off)


_real_spawn = RealmWorker.spawn


async def _spawn_out_of_step(**kwargs: Any) -> RealmWorker:
    worker = await _real_spawn(**kwargs)
    worker.__class__ = _OutOfStep
    return worker
