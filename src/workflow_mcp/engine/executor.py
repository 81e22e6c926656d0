"""The seam where a run hands one live agent call to its provider: :class:`AgentExecutor`.

The run coordinator decides everything about a call first (admission, the cap, the budget, replay,
the stall watchdog, schema re-asks); an executor only carries out one attempt and returns the
provider's answer. The realm, the journal and the event store stay with the coordinator, so a run's
results, events and journal do not depend on where its calls ran.

- :class:`LocalExecutor` runs each call in this process, on the run's event loop (the default).
- :class:`RayExecutor` sends each call to a Ray task (``pip install 'workflow-mcp[ray]'``): an actor
  task on one of the *call runners* of a :class:`RayCluster`. The runner builds the provider itself
  from the run's :class:`ProviderSpec` — the provider name (or the routing), the fake's script and the
  configuration resolved where the run started (routing, settings, model maps, policy) — so the
  credentials a provider reads come from the Ray worker's own environment and never travel from the
  coordinator. The provider's progress events stream back as the call goes (they reset the stall
  window exactly as a local provider's do); its answer or its error comes back as a value.

Ray semantics (each a test in ``tests/integration/test_ray_executor.py``):

- **Concurrency**: the run's scheduler bounds how many calls are in flight; each is one Ray task.
- **Cancellation**: a cancelled call cancels its Ray task (``ray.cancel``; the runner fires the
  provider's cancel signal and cancels it) and waits until the runner says the call has wound up
  there, at most :data:`CANCEL_WAIT_S` seconds, before the call ends cancelled.
- **A worker that dies mid-call** (its process killed, its node lost) is retried on a runner Ray
  restarts, at most ``retries`` times (:data:`WORKER_LOSS_RETRIES` by default); each retry is a
  provider ``retry`` event. Past that the call is a provider failure (``provider_failed``: agent()
  resolves ``null``). Ray itself never re-runs a call (``max_task_retries=0``), and an answer that
  reached the coordinator is final, so a completed call is never run twice.
- **Human checkpoints** cross back: a provider's :class:`CheckpointAsk` on the worker is asked of the
  run here (``context.checkpoint``: journaled replies, a live asker, or a pause with
  ``checkpoint_required``) and the answer goes back to the waiting provider. A call whose run can
  ask nobody gets no hook there either, exactly as locally (fail closed).
- **Per-run provider state** stays per call: a fake script's ``sequence`` counts the calls one provider
  answers, so it is refused up front (:func:`check_remote_script`); use the local executor for it.
- **Worktrees** (``isolation: 'worktree'``) belong to the executor. Locally they are made and judged in
  this process (:func:`~.worktree.create_worktree`, :func:`~.worktree.finish_worktree`). On Ray the
  call is placed on one node first: the *pinned runner* of that node (a call runner held there by
  ``NodeAffinitySchedulingStrategy(node, soft=False)``, so Ray restarts it only there) creates the
  worktree, runs every attempt of the call in it (retries after a worker death, schema re-asks, stall
  and rate-limit retries) and finally judges it by the same rule (kept when changed or committed,
  else removed). The judgement crosses back with where the worktree is (``rayNodeId``, ``host``,
  ``rayWorkerPid``: the process that created it), so the coordinator emits the same events as a local
  run. The repository must be at the same path on every node (a shared checkout); a node without it
  fails the call naming the node and the path. A node lost with the worktree fails the call as a
  provider failure (``provider_failed``) naming the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..errors import InvalidInputError
from ..providers.base import (
    AgentContext,
    AgentExecutionError,
    AgentProvider,
    AgentRequest,
    AgentResult,
    AgentStalledError,
    CancelSignal,
    CheckpointAsk,
    ProviderAuthError,
    ProviderEvent,
    ProviderSetupError,
    ProviderUsageLimitError,
)
from .worktree import Worktree, WorktreeError, create_worktree, finish_worktree

if TYPE_CHECKING:
    from ..providers.config import ProviderConfig

__all__ = [
    "CANCEL_WAIT_S",
    "CONNECT_TIMEOUT_S",
    "RESTART_WAIT_S",
    "WORKER_LOSS_RETRIES",
    "AgentExecutor",
    "ExecutorUnavailableError",
    "LocalExecutor",
    "Placement",
    "ProviderSpec",
    "RayCluster",
    "RayExecutor",
    "check_remote_script",
]

#: How many times a call whose Ray worker died is sent again before it is a provider failure.
WORKER_LOSS_RETRIES: Final = 3
#: Seconds a cancelled call waits for its Ray task to end before it ends anyway.
CANCEL_WAIT_S: Final = 10.0
#: Seconds a retry waits for Ray to restart the call runner whose process died (when it has no other).
RESTART_WAIT_S: Final = 60.0
#: Seconds the coordinator tries to reach a Ray address before it says the address is unreachable.
CONNECT_TIMEOUT_S: Final = 5.0
#: The extra that installs Ray.
RAY_EXTRA: Final = "workflow-mcp[ray]"
#: How every call runner is made: it reserves no CPU (an agent call mostly waits on a model), runs any
#: number of calls at once, is restarted whenever its process dies, and never re-runs a call behind
#: the executor's back (the executor decides).
_RUNNER_OPTIONS: Final[dict[str, Any]] = {
    "num_cpus": 0,
    "max_restarts": -1,
    "max_task_retries": 0,
    "max_concurrency": 10_000,
}


class AgentExecutor(Protocol):
    """Carries out one provider attempt of one live agent call, and owns the worktree of a call with
    ``isolation: 'worktree'`` (made before its first attempt, judged after its last)."""

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        """The provider's answer to ``request``. ``context`` carries the call's cancel signal, its
        progress events (they reset the stall window) and its checkpoint hook; they must reach the
        provider unchanged. Raises what the provider raises (``AgentExecutionError`` and its kin,
        ``CancelledError`` when the run cancels the call)."""
        ...

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
        """The worktree ``<root_dir>/<run_id>/<agent_id>`` of ``cwd``'s repository at its ``HEAD``,
        made where the call's attempts will run (they get its ``path`` as ``request.cwd``).

        Raises:
            WorktreeError: as :func:`~.worktree.create_worktree`, or the place that would run the
                call cannot make it there (the message names it).
        """
        ...

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        """Judge ``tree`` after the call's last attempt, where it was made, by
        :func:`~.worktree.settle_worktree`'s rule; its payload ``{"path", "changed", "kept", "head"?,
        "error"?}`` plus where the worktree is, when that is not this process. Never raises."""
        ...


class LocalExecutor:
    """Runs each call in this process, on the run's event loop; its worktrees are made here."""

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        return await provider.execute(request, context)

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
        return await create_worktree(cwd, root_dir, run_id, agent_id)

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        return await finish_worktree(tree)


class ExecutorUnavailableError(InvalidInputError):
    """Raised before any call when the chosen executor cannot be used: Ray is not installed (the
    message names the extra) or its cluster cannot be reached (the message names the address)."""


@dataclass(frozen=True)
class ProviderSpec:
    """How a Ray worker builds a run's provider: ``name`` forced for every call (``None``: the
    configuration routes each call), ``fake_script`` the fake's script (with ``fake`` only), ``cwd`` the
    run's directory and ``config`` the configuration that applies there, read by the coordinator
    (:func:`~workflow_mcp.providers.config.load_config`; it holds settings and policy, no secret)."""

    name: str | None
    cwd: str
    config: ProviderConfig
    fake_script: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Placement:
    """Where a Ray call's worktree was made: the Ray ``node_id`` (hex), that node's ``host`` name and
    the ``pid`` of the runner process that created it. Every attempt of the call runs on that node."""

    node_id: str
    host: str
    pid: int

    def to_json(self) -> dict[str, object]:
        """The keys the worktree's finish payload adds: ``rayNodeId``, ``host``, ``rayWorkerPid``."""
        return {"rayNodeId": self.node_id, "host": self.host, "rayWorkerPid": self.pid}


def check_remote_script(script: Mapping[str, Any] | None) -> None:
    """Refuse a fake script whose answers depend on the calls one provider instance answered before:
    a ``sequence`` (a rule's or the default's). On Ray each call builds its own provider.

    Raises:
        ExecutorUnavailableError: naming the rule (``rules[2].respond.sequence``).
    """
    if not script:
        return
    places: list[tuple[str, Any]] = [("default", script.get("default"))]
    rules = script.get("rules")
    if isinstance(rules, list):
        places += [
            (f"rules[{i}].respond", rule.get("respond"))
            for i, rule in enumerate(rules)
            if isinstance(rule, dict)
        ]
    for where, respond in places:
        if isinstance(respond, Mapping) and "sequence" in respond:
            raise ExecutorUnavailableError(
                f"fake script {where}.sequence counts the calls of one provider, but --executor ray "
                "builds each call's provider on a Ray worker; run this script with --executor local"
            )


# -- Ray --------------------------------------------------------------------------------------


def _import_ray() -> Any:
    """The ``ray`` module, or a clear error naming the extra."""
    try:
        import ray
    except ImportError as exc:
        raise ExecutorUnavailableError(
            f"--executor ray needs Ray, which is not installed ({exc}): pip install '{RAY_EXTRA}'"
        ) from None
    return ray


def _notices_to_stderr(ray: Any) -> None:
    """Ray's driver prints cluster notices ("a worker died…") on ``sys.stdout``; here stdout may carry
    JSON-RPC (``serve`` on stdio), so they go to stderr. Ray offers no switch for it: its module-level
    printer is wrapped once (nothing happens when a Ray release no longer has it)."""
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if module is None or original is None or getattr(original, "to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr


def _probe(address: str, timeout_s: float) -> None:
    """Refuse a ``HOST:PORT`` address nothing listens on (``ray.init`` would retry for minutes).
    Other forms (``auto``, ``ray://…``, ``local``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        raise ExecutorUnavailableError(
            f"cannot reach the Ray cluster at {address} ({exc}): start it with `ray start --head` "
            "or fix ray_address / --ray-address"
        ) from None


class RayCluster:
    """A connection to a Ray cluster and the call runners this process keeps on it.

    :meth:`connect` joins the cluster at ``address`` (``None``: ``$RAY_ADDRESS``, else a new local
    cluster) and starts ``runners`` call runners (default: one per CPU of the cluster), each an async
    Ray actor that reserves no CPU (an agent call mostly waits on a model) and runs any number of
    calls at once; Ray spreads them over the nodes and restarts one whose process dies. A worktree
    call goes to the *pinned runner* of the node it is placed on, started there at the node's first
    such call (see the module docstring). ``retries`` bounds how often a call whose worker died is
    sent again. :meth:`close` stops the runners and leaves the cluster (a local cluster it started
    stops with it). One per process: Ray's driver is.
    """

    def __init__(self, ray: Any, runners: list[Any], *, address: str, retries: int, owns: bool) -> None:
        self._ray = ray
        self._runners = runners
        self._load = [0] * len(runners)  # calls in flight per runner
        self.address = address
        self.retries = retries
        self._owns = owns  # ray.init was ours: close() shuts Ray down
        self._pinned: dict[str, Any] = {}  # node id -> the runner held on that node (worktree calls)
        self._placed: dict[str, int] = {}  # node id -> worktree calls placed there, in flight
        self._chosen: dict[str, int] = {}  # node id -> worktree calls ever placed there (ties rotate)
        self.in_flight = 0
        self.peak_in_flight = 0

    @classmethod
    def connect(
        cls,
        address: str | None = None,
        *,
        runners: int | None = None,
        retries: int = WORKER_LOSS_RETRIES,
        init_options: Mapping[str, Any] | None = None,
    ) -> RayCluster:
        """Join the Ray cluster at ``address`` and start the call runners, waiting until each answers
        (blocks: seconds; a new local cluster, about 15 s).

        ``init_options`` are extra ``ray.init`` keywords (e.g. ``num_cpus`` of a new local cluster).

        Raises:
            ExecutorUnavailableError: Ray is not installed (names ``workflow-mcp[ray]``), nothing
                answers at ``address`` within :data:`CONNECT_TIMEOUT_S` seconds (names the address), or
                the call runners cannot start there (a node without workflow-mcp; names the extra).
        """
        ray = _import_ray()
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address is not None:
            _probe(address, CONNECT_TIMEOUT_S)
        owns = not ray.is_initialized()
        if owns:
            try:
                ray.init(
                    address=address,
                    # Ray workers' output must never reach stdout: in `serve` it carries JSON-RPC.
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    **({"include_dashboard": False} | dict(init_options or {})),
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ExecutorUnavailableError(
                    f"cannot join the Ray cluster at {address or 'a new local cluster'}: {exc}"
                ) from None
        _notices_to_stderr(ray)
        where = address or str(ray.get_runtime_context().gcs_address)
        count = runners or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(**_RUNNER_OPTIONS, scheduling_strategy="SPREAD")(_CallRunner)
        started = [actor.remote() for _ in range(count)]
        try:
            ray.get([runner.pid.remote() for runner in started], timeout=RESTART_WAIT_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            for runner in started:
                with contextlib.suppress(Exception):
                    ray.kill(runner)
            if isinstance(exc, ray.exceptions.GetTimeoutError | TimeoutError):
                problem = f"they did not start within {RESTART_WAIT_S:g} s"
            else:
                problem = _first_line(exc)
            raise ExecutorUnavailableError(
                f"the call runners could not start on the Ray cluster at {where}: {problem}; every node "
                f"needs this workflow-mcp release with the ray extra (pip install '{RAY_EXTRA}')"
            ) from None
        return cls(ray, started, address=where, retries=retries, owns=owns)

    def executor(self, spec: ProviderSpec) -> RayExecutor:
        """The executor of one run whose provider ``spec`` describes."""
        return RayExecutor(self, spec)

    async def active_calls(self) -> list[int]:
        """How many calls each runner is executing right now (its own count)."""
        return [int(n) for n in await asyncio.gather(*(r.active.remote() for r in self._runners))]

    async def wait_ready(self) -> None:
        """Wait until every runner answers (Ray restarts one whose process died), each at most
        :data:`RESTART_WAIT_S` seconds."""
        await asyncio.gather(*(self._ready(i) for i in range(len(self._runners))))

    async def runner_pids(self) -> list[int]:
        """The process id of each runner (a runner Ray restarted has a new one)."""
        return [int(n) for n in await asyncio.gather(*(r.pid.remote() for r in self._runners))]

    async def pinned_pids(self) -> dict[str, int]:
        """``{node id: process id}`` of the pinned runner of each node that ran a worktree call (one
        that cannot answer, its node gone, is left out)."""
        nodes = list(self._pinned)
        pids = await asyncio.gather(*(self._pinned[n].pid.remote() for n in nodes), return_exceptions=True)
        return {node: int(pid) for node, pid in zip(nodes, pids, strict=True) if isinstance(pid, int)}

    def close(self) -> None:
        """Stop the runners (pinned ones too) and, when this process started Ray, shut Ray down.
        Never raises."""
        for runner in [*self._runners, *self._pinned.values()]:
            with contextlib.suppress(Exception):  # a runner or a cluster already gone
                self._ray.kill(runner)
        self._runners = []
        self._pinned = {}
        if self._owns:
            with contextlib.suppress(Exception):
                self._ray.shutdown()

    def _pick(self, avoid: int | None) -> int:
        """The least loaded runner, other than ``avoid`` (the one that just died) when there are others."""
        if not self._runners:
            raise AgentExecutionError("the Ray executor is closed")
        choices = [i for i in range(len(self._runners)) if i != avoid] or [0]
        return min(choices, key=self._load.__getitem__)

    async def _ready(self, index: int) -> None:
        """Wait until runner ``index`` answers again (Ray restarts a dead one), at most
        :data:`RESTART_WAIT_S` seconds; a runner still down then fails the next attempt as lost."""
        await self._answering(self._runners[index])

    async def _answering(self, runner: Any, node: str | None = None) -> None:
        """Wait until ``runner`` answers (see :meth:`_ready`); for the pinned runner of ``node``, no
        longer than that node is alive (Ray cannot restart it elsewhere)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_S
        pause = 0.1
        while True:
            try:
                await asyncio.wait_for(runner.pid.remote(), max(0.1, deadline - loop.time()))
                return
            except (self._ray.exceptions.RayError, TimeoutError):  # also a node gone: unschedulable
                if loop.time() + pause >= deadline:
                    return
                if node is not None and node not in (await self._live_nodes() or {node: ""}):
                    return  # the next attempt says the node is gone
            await asyncio.sleep(pause)  # backoff while Ray restarts the runner's process
            pause = min(pause * 2, 2.0)

    # -- worktree calls: one node each ----------------------------------------------------------

    async def _live_nodes(self) -> dict[str, str] | None:
        """``{node id: host name}`` of the cluster's live nodes (``None`` when Ray cannot tell)."""
        try:
            nodes = await asyncio.to_thread(self._ray.nodes)
        except (self._ray.exceptions.RayError, OSError, RuntimeError):  # the GCS out of reach for now
            return None
        return {
            str(n["NodeID"]): str(n.get("NodeManagerHostname", ""))
            for n in nodes
            if n.get("Alive") and n.get("NodeID")
        }

    async def _choose_node(self) -> str:
        """The live node with the fewest worktree calls in flight (nodes with CPUs first; ties go to
        the node chosen least often)."""
        try:
            nodes = [
                n for n in await asyncio.to_thread(self._ray.nodes) if n.get("Alive") and n.get("NodeID")
            ]
        except self._ray.exceptions.RayError as exc:
            raise WorktreeError(f"the Ray cluster could not list its nodes: {_first_line(exc)}") from None
        working = [n for n in nodes if float(n.get("Resources", {}).get("CPU", 0)) > 0] or nodes
        if not working:
            raise WorktreeError("the Ray cluster has no live node to make the call's worktree on")
        ids = sorted(str(n["NodeID"]) for n in working)
        return min(ids, key=lambda node: (self._placed.get(node, 0), self._chosen.get(node, 0)))

    def _pinned_runner(self, node: str) -> Any:
        """The call runner held on ``node`` (started at its first use: about a second): Ray restarts
        it only there, and a node that is gone makes it unschedulable."""
        runner = self._pinned.get(node)
        if runner is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            pinned = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            actor = self._ray.remote(**_RUNNER_OPTIONS, scheduling_strategy=pinned)(_CallRunner)
            runner = self._pinned[node] = actor.remote()
        return runner

    async def create_worktree(
        self, cwd: str, root_dir: str, run_id: str, agent_id: str
    ) -> tuple[Worktree, Placement]:
        """Place a worktree call on a node and have that node's pinned runner create its worktree
        there (:func:`~.worktree.create_worktree`); the call's attempts then go to that runner.

        Raises:
            WorktreeError: as :func:`~.worktree.create_worktree` (git's message, from the node); the
                repository path does not exist on the node (naming the node and the path); the runner
                could not be reached there (naming the node).
        """
        if not self._runners:
            raise WorktreeError("the Ray executor is closed")
        node = await self._choose_node()
        self._chosen[node] = self._chosen.get(node, 0) + 1
        try:
            answer = await self._pinned_runner(node).create_worktree.remote(cwd, root_dir, run_id, agent_id)
        except self._ray.exceptions.RayError as exc:
            raise WorktreeError(
                f"isolation: 'worktree' could not make the call's worktree on the Ray node {node}: "
                f"{_first_line(exc)}"
            ) from None
        if "error" in answer:
            raise WorktreeError(str(answer["error"]))
        self._placed[node] = self._placed.get(node, 0) + 1
        return answer["tree"], Placement(node_id=node, host=str(answer["host"]), pid=int(answer["pid"]))

    async def finish_worktree(self, tree: Worktree, placement: Placement) -> dict[str, object]:
        """Judge ``tree`` on its node (:func:`~.worktree.settle_worktree`, by its pinned runner; one
        whose process died is waited for while Ray restarts it there). Its payload plus
        :meth:`Placement.to_json`; a node that is gone, or a runner that cannot answer, gives a kept
        worktree with an ``error`` naming the node. Never raises."""
        node = placement.node_id
        where = placement.to_json()
        runner = self._pinned_runner(node) if self._runners else None
        problem = "the Ray executor is closed"
        try:
            for attempt in range(2):
                if runner is None:
                    break
                try:
                    info = await runner.finish_worktree.remote(tree)
                    return {**info, **where}
                except self._ray.exceptions.RayActorError as exc:
                    problem = _first_line(exc)
                    live = await self._live_nodes()
                    if live is not None and node not in live:
                        problem = f"the node is gone ({problem})"
                        break
                    if attempt == 0:
                        await self._answering(runner, node)  # Ray restarts it on the same node
                except self._ray.exceptions.RayError as exc:  # unschedulable: the node is gone
                    problem = _first_line(exc)
                    break
        finally:
            self._placed[node] = max(0, self._placed.get(node, 0) - 1)
        return {
            "path": tree.path,
            "changed": True,
            "kept": True,
            "error": f"the worktree could not be judged on the Ray node {node} ({placement.host}): {problem}",
            **where,
        }

    async def execute(
        self,
        spec: ProviderSpec,
        request: AgentRequest,
        context: AgentContext,
        *,
        placement: Placement | None = None,
    ) -> AgentResult:
        """One call on a runner; see the module docstring for cancellation and lost workers. With
        ``placement`` (a worktree call) every attempt goes to the pinned runner of that node, and a
        node that is gone makes the call a provider failure naming the node."""
        lost = ""
        dead: int | None = None
        for attempt in range(self.retries + 1):
            if context.signal.cancelled:
                raise asyncio.CancelledError(context.signal.reason)
            if placement is not None:
                index = -1
                if not self._runners:
                    raise AgentExecutionError("the Ray executor is closed")
                runner = self._pinned_runner(placement.node_id)
                if dead is not None:
                    await self._answering(runner, placement.node_id)  # restarted on that node, or gone
            else:
                index = self._pick(dead)
                if index == dead:
                    await self._ready(index)
                runner = self._runners[index]
                self._load[index] += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                call_id = uuid.uuid4().hex
                stream = runner.call.remote(spec, request, context.checkpoint is not None, call_id)
                return await self._follow(runner, call_id, stream, context)
            except self._ray.exceptions.RayActorError as exc:
                if getattr(exc, "actor_init_failed", False):  # a runner that cannot start there
                    raise ProviderSetupError(
                        f"the call runner could not start on the Ray worker: {_first_line(exc)}; "
                        f"install this workflow-mcp release with pip install '{RAY_EXTRA}' on every node"
                    ) from None
                lost = _first_line(exc)
                dead = index
                if placement is not None:
                    live = await self._live_nodes()
                    if live is not None and placement.node_id not in live:
                        return _node_gone(placement, request, lost)
            except self._ray.exceptions.RayError as exc:
                if placement is not None and isinstance(exc, _unschedulable(self._ray)):
                    return _node_gone(placement, request, _first_line(exc))
                # Ray itself failed the task (not the provider, whose errors come back as values).
                raise AgentExecutionError(f"the Ray task of the call failed: {_first_line(exc)}") from None
            finally:
                if index >= 0:
                    self._load[index] -= 1
                self.in_flight -= 1
            if attempt < self.retries:
                await context.emit(
                    ProviderEvent(
                        kind="retry",
                        text=f"the Ray worker running the call died ({lost}); sending it again "
                        f"({attempt + 1} of {self.retries})",
                    )
                )
        return AgentResult(
            outcome="provider_failed",
            message=f"the Ray worker running the call died {self.retries + 1} times (at most "
            f"{self.retries} retries): {lost}",
        )

    async def _follow(self, runner: Any, call_id: str, stream: Any, context: AgentContext) -> AgentResult:
        """Relay the runner's items until its answer; cancel the Ray task when the call is cancelled."""
        items: AsyncIterator[Any] = stream.__aiter__()
        cancelled = asyncio.ensure_future(context.signal.wait())
        following: asyncio.Future[Any] | None = None
        try:
            while True:
                following = asyncio.ensure_future(_next(items))
                await asyncio.wait({following, cancelled}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    raise asyncio.CancelledError(context.signal.reason)
                item = following.result()
                following = None
                if item is None:
                    raise AgentExecutionError("the Ray task ended without an answer")
                kind, value = item
                if kind == "started":
                    # A sign of life (it resets the stall window) saying where the call runs.
                    await context.emit(
                        ProviderEvent(
                            kind="progress",
                            text=f"running on the Ray worker pid {value['pid']} at {value['host']}",
                            data={
                                "rayWorkerPid": value["pid"],
                                "rayNode": value["host"],
                                "rayNodeId": value["node"],
                            },
                        )
                    )
                elif kind == "event":
                    await context.emit(value)
                elif kind == "ask":
                    # A human checkpoint of the provider on the worker: asked here, answered there.
                    allow = await context.checkpoint(value["ask"]) if context.checkpoint is not None else None
                    await runner.answer.remote(value["id"], allow)
                elif kind == "result":
                    assert isinstance(value, AgentResult)
                    return value
                elif kind == "error":
                    raise _rebuilt(value)
        except asyncio.CancelledError:
            await self._cancel(runner, call_id, stream, items, following)
            raise
        finally:
            cancelled.cancel()

    async def _cancel(
        self,
        runner: Any,
        call_id: str,
        stream: Any,
        items: AsyncIterator[Any],
        pending: asyncio.Future[Any] | None,
    ) -> None:
        """Cancel the Ray task and wait (at most :data:`CANCEL_WAIT_S` seconds) until it has ended and
        the runner says the call has wound up there."""
        with contextlib.suppress(Exception):
            self._ray.cancel(stream)

        async def drain() -> None:
            # TaskCancelledError (the task ended cancelled) or a lost worker: either way it has ended.
            with contextlib.suppress(Exception):
                if pending is None or await pending is not None:
                    while await _next(items) is not None:
                        pass
            with contextlib.suppress(Exception):  # a runner that died has nothing left running
                await runner.settled.remote(call_id)

        # Already winding up a cancellation: a second one (a run stopping cancels its calls again)
        # must not cut this wait short, or the run could end while its call still runs on the node.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT_S
        winding = asyncio.ensure_future(drain())
        while not winding.done() and loop.time() < deadline:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({winding}, timeout=deadline - loop.time())
        if not winding.done():
            winding.cancel()


def _unschedulable(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a task or actor whose pinned node is gone (``soft=False``)."""
    names = ("ActorUnschedulableError", "TaskUnschedulableError")
    return tuple(kind for name in names if isinstance(kind := getattr(ray.exceptions, name, None), type))


def _node_gone(placement: Placement, request: AgentRequest, detail: str) -> AgentResult:
    """A worktree call whose node is gone: a provider failure naming the node (its worktree with it)."""
    return AgentResult(
        outcome="provider_failed",
        message=f"the Ray node {placement.node_id} ({placement.host}) that holds the call's worktree "
        f"{request.cwd} is gone ({detail}); the call cannot run anywhere else",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _next(items: AsyncIterator[Any]) -> Any:
    """The next item the runner yielded (``None`` when its stream ended)."""
    try:
        ref = await items.__anext__()
    except StopAsyncIteration:
        return None
    return await ref


class RayExecutor:
    """Runs each call of one run on a :class:`RayCluster`, its provider built there from ``spec``.
    The coordinator's own ``provider`` object is not used (it stays for capability checks). A worktree
    call is placed on one node by :meth:`create_worktree`; its attempts (``request.cwd`` is the
    worktree's path) go there until :meth:`finish_worktree`."""

    def __init__(self, cluster: RayCluster, spec: ProviderSpec) -> None:
        self.cluster = cluster
        self.spec = spec
        self._placements: dict[str, Placement] = {}  # worktree path -> where it was made

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        placement = self._placements.get(request.cwd) if request.cwd is not None else None
        return await self.cluster.execute(self.spec, request, context, placement=placement)

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> Worktree:
        tree, placement = await self.cluster.create_worktree(cwd, root_dir, run_id, agent_id)
        self._placements[tree.path] = placement
        return tree

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        placement = self._placements.pop(tree.path, None)
        if placement is None:  # not made by this executor: judged where it is, here
            return await finish_worktree(tree)
        return await self.cluster.finish_worktree(tree, placement)


# -- what crosses back from a runner ----------------------------------------------------------

_ERRORS: Final[dict[str, type[Exception]]] = {
    "execution": AgentExecutionError,
    "setup": ProviderSetupError,
    "stalled": AgentStalledError,
}


def _flattened(exc: BaseException) -> dict[str, Any]:
    """A provider error as plain data (exceptions with their own constructors do not pickle back)."""
    if isinstance(exc, ProviderAuthError):
        return {"kind": "auth", "backend": exc.backend, "detail": exc.detail, "hint": exc.login_hint}
    if isinstance(exc, ProviderUsageLimitError):
        return {"kind": "usage_limit", "backend": exc.backend, "detail": exc.detail, "resets": exc.resets_at}
    if isinstance(exc, ProviderSetupError):
        return {"kind": "setup", "message": str(exc)}
    if isinstance(exc, AgentStalledError):
        return {"kind": "stalled", "message": str(exc)}
    if isinstance(exc, AgentExecutionError | InvalidInputError):
        # InvalidInputError: the worker could not build the provider (unknown, not installed there).
        return {"kind": "execution", "message": str(exc)}
    return {
        "kind": "execution",
        "message": f"the provider failed on the Ray worker {socket.gethostname()}: {type(exc).__name__}: {exc}",
    }


def _rebuilt(data: Mapping[str, Any]) -> Exception:
    kind = data.get("kind")
    if kind == "auth":
        return ProviderAuthError(data["backend"], data["detail"], login_hint=data["hint"])
    if kind == "usage_limit":
        return ProviderUsageLimitError(data["backend"], data["detail"], resets_at=data["resets"])
    return _ERRORS.get(str(kind), AgentExecutionError)(str(data.get("message", "")))


class _CallRunner:
    """The Ray actor that executes calls (made remote by :meth:`RayCluster.connect`). It builds each
    run's provider from its :class:`ProviderSpec` with this worker's own environment, once per spec
    (a fake once per call), and yields ``("started", {"pid", "host", "node"})``, ``("event", ProviderEvent)``
    and ``("ask", {"id", "ask": CheckpointAsk})`` items (an ask waits for :meth:`answer`), then one
    ``("result", AgentResult)`` or ``("error", {...})``. A pinned runner also makes and judges the
    worktrees of the calls placed on its node (:meth:`create_worktree`, :meth:`finish_worktree`)."""

    def __init__(self) -> None:
        self._providers: dict[str, AgentProvider] = {}
        self._active = 0
        self._asks: dict[str, asyncio.Future[bool | None]] = {}  # checkpoint questions awaiting answers
        self._running: dict[str, asyncio.Event] = {}  # call id -> set when the call has wound up here

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> dict[str, Any]:
        """``{"pid", "host", "node"}``: this process, its host name and its Ray node id."""
        import ray

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "node": ray.get_runtime_context().get_node_id(),
        }

    async def create_worktree(self, cwd: str, root_dir: str, run_id: str, agent_id: str) -> dict[str, Any]:
        """Make the call's worktree here: ``{"tree": Worktree, "pid", "host", "node"}``, or
        ``{"error": message}`` (the repository path missing on this node names the node and the path)."""
        here = self.where()
        if not os.path.isdir(cwd):
            return {
                "error": f"isolation: 'worktree' needs the repository at {cwd} on the Ray node "
                f"{here['node']} ({here['host']}) that runs the call, and that directory does not exist "
                "there: keep the repository at the same path on every node (e.g. a shared checkout)"
            }
        try:
            tree = await create_worktree(cwd, root_dir, run_id, agent_id)
        except WorktreeError as exc:
            return {"error": str(exc)}
        return {"tree": tree, **here}

    async def finish_worktree(self, tree: Worktree) -> dict[str, object]:
        """Judge a worktree made on this node (:func:`~.worktree.settle_worktree`)."""
        return await finish_worktree(tree)

    def active(self) -> int:
        return self._active

    async def settled(self, call_id: str) -> None:
        """Return once call ``call_id`` has wound up here (its provider cancelled and cleaned up), at
        most :data:`CANCEL_WAIT_S` seconds; at once for a call that ended or never started."""
        ended = self._running.get(call_id)
        if ended is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), CANCEL_WAIT_S)

    def answer(self, ask_id: str, allow: bool | None) -> None:
        """The coordinator's answer to checkpoint question ``ask_id`` (``None``: nobody can answer)."""
        waiting = self._asks.pop(ask_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(allow)

    def _provider(self, spec: ProviderSpec) -> AgentProvider:
        from ..providers.fake import FakeProvider
        from ..providers.routing import build_router

        if spec.name == "fake":
            return FakeProvider(spec.fake_script)
        key = repr((spec.name, spec.cwd, dataclasses.asdict(spec.config)))
        built = self._providers.get(key)
        if built is None:
            built = self._providers[key] = build_router(provider=spec.name, cwd=spec.cwd, config=spec.config)
        return built

    async def call(
        self, spec: ProviderSpec, request: AgentRequest, asks: bool, call_id: str
    ) -> AsyncIterator[tuple[str, Any]]:
        """One call (``asks``: the coordinator can answer human checkpoints; ``call_id`` names it for
        :meth:`settled`)."""
        self._active += 1
        self._running[call_id] = asyncio.Event()
        mine: list[str] = []
        try:
            queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
            signal = CancelSignal()

            async def emit(event: ProviderEvent) -> None:
                queue.put_nowait(("event", event))

            async def checkpoint(ask: CheckpointAsk) -> bool | None:
                # The question goes to the coordinator with the call's items; its answer comes back
                # through answer(). A cancelled call leaves it unanswered: the provider is cancelled too.
                ask_id = uuid.uuid4().hex
                mine.append(ask_id)
                waiting: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
                self._asks[ask_id] = waiting
                queue.put_nowait(("ask", {"id": ask_id, "ask": ask}))
                return await waiting

            async def answer() -> AgentResult:
                provider = self._provider(spec)
                context = AgentContext(signal=signal, emit=emit, checkpoint=checkpoint if asks else None)
                return await provider.execute(request, context)

            task = asyncio.ensure_future(answer())
            try:
                yield ("started", self.where())
                while True:
                    getting = asyncio.ensure_future(queue.get())
                    await asyncio.wait({task, getting}, return_when=asyncio.FIRST_COMPLETED)
                    if getting.done():
                        yield getting.result()
                        continue
                    getting.cancel()
                    while not queue.empty():
                        yield queue.get_nowait()
                    break
            except asyncio.CancelledError:
                signal.cancel("cancelled")
                task.cancel()
                await asyncio.wait({task}, timeout=CANCEL_WAIT_S)
                raise
            try:
                result = task.result()
            except Exception as exc:  # the provider's error crosses back as data
                yield ("error", _flattened(exc))
            else:
                yield ("result", result)
        finally:
            self._active -= 1
            self._running.pop(call_id).set()
            for ask_id in mine:
                self._asks.pop(ask_id, None)
