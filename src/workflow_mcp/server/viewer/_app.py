"""The run viewer's web app (Starlette, the stack the ``mcp`` SDK serves Streamable HTTP with).

Routes, under the mount point ``base`` (``/ui``):

=====================================  =========================================================
``GET  /``                              runs page (``?status=&workflow=&page=``), newest first
``GET  /runs/{run_id}``                 run page (server-rendered at the state's ``lastSequence``)
``GET  /api/runs/{run_id}``             the page's data as JSON (:func:`._view.run_view`)
``GET  /api/runs/{run_id}/agents/{id}``  one agent call's details (bounded, redacted)
``GET  /api/runs/{run_id}/events``      Server-Sent Events after ``?after=N`` or ``Last-Event-ID``
``POST /api/runs/{run_id}/cancel``      cancel (the run's owner, or the local user)
``POST /api/runs/{run_id}/resume``      resume a stopped run as a new run; answers ``{runId, url}``
``GET|POST /login``                     sign in: the bearer token becomes a cookie
``GET  /static/…``                      the page's own script and style sheet
=====================================  =========================================================

Who is asking is decided in front of this app (:class:`~workflow_mcp.server.http.HttpGuard`: bearer
token or viewer cookie) and read from the request scope; a request without a principal is refused
(401). A run another client started answers 404, exactly as an unknown run does, so its existence is
not disclosed. Every stream event carries its ``sequence`` as the SSE ``id``: a browser reconnecting
sends it back as ``Last-Event-ID`` and continues after it, so nothing is missed or repeated.
"""

from __future__ import annotations

import json
import posixpath
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._prices import PriceTable
from ...errors import StoreError, WorkflowMcpError, WorkflowNotFoundError
from ...service import WorkflowService
from ...state import RUN_STATUSES, TERMINAL
from .._policy import Principal
from . import _pages
from ._view import Timeline, agent_view, event_view, run_view, summary_view

__all__ = [
    "COOKIE",
    "CSP",
    "PAGE_SIZE",
    "SIGN_IN_BODY_LIMIT",
    "SIGN_IN_FIELDS",
    "STREAM_BATCH",
    "TOKEN_CHECK_KEY",
    "LocalControl",
    "RunControl",
    "viewer_app",
]

COOKIE = "workflow_mcp_viewer"
"""The prefix of the cookie that carries a signed-in browser's viewer session (``COOKIE_<port>``;
HttpOnly, SameSite=Strict, path ``/ui``; never the bearer token: see
:class:`~workflow_mcp.server.http.ViewerSessions`)."""
TOKEN_CHECK_KEY = "workflow_mcp.viewer_token_check"
"""Where :class:`~workflow_mcp.server.http.HttpGuard` puts the sign-in form's token check in the scope:
``token -> (cookie name, session id)`` for one of the server's tokens, else ``None``."""
PAGE_SIZE = 25
"""Runs per page of the runs page."""
STREAM_BATCH = 500
"""Events the stream reads from the store at a time."""
STREAM_WAIT_MS = 10_000
"""How long one wait for new events lasts before the stream checks the run and pings."""
SIGN_IN_BODY_LIMIT = 4096
"""Bytes the sign-in form's body may hold (it is read before any token is checked)."""
SIGN_IN_FIELDS = 8
"""Fields the sign-in form's body may hold."""
_SCAN = 5000
"""Runs a filtered runs page looks through (the newest; the store lists runs newest first)."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The pages' Content-Security-Policy: only the viewer's own files, never another origin."""
_STATIC = Path(__file__).with_name("static")
PRINCIPAL_KEY = (
    "workflow_mcp.principal"  # the key HttpGuard stores the caller under (mcp.PRINCIPAL_SCOPE_KEY)
)


class RunControl(Protocol):
    """What the viewer's buttons do. ``cancel`` returns the service's outcome (``requested``,
    ``cancelling`` or the status the run already had); ``resume`` the new run's id. Both raise
    :class:`~workflow_mcp.errors.WorkflowMcpError` with a message for the person who pressed it."""

    async def cancel_run(self, principal: Principal, run_id: str) -> str: ...

    async def resume_run(self, principal: Principal, run_id: str) -> str: ...


class LocalControl:
    """Cancel and resume for the local user (``workflow-mcp ui``), as the CLI's ``runs cancel`` and
    ``resume`` do: a resumed run runs in this process, under the run's stored options."""

    def __init__(self, service: WorkflowService) -> None:
        self.service = service

    async def cancel_run(self, principal: Principal, run_id: str) -> str:
        return self.service.cancel(run_id, "cancelled from the run viewer")

    async def resume_run(self, principal: Principal, run_id: str) -> str:
        handle = await self.service.resume(run_id, owner=principal.owner)
        return handle.run_id


def _principal(request: Request) -> Principal | None:
    state = request.scope.get("state")
    found = state.get(PRINCIPAL_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


def _not_visible(run_id: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": "not_found",
            "message": f"No run {run_id!r} is visible to you: it does not exist, or another "
            "client started it.",
        },
        status_code=404,
    )


async def _sign_in_fields(request: Request) -> dict[str, str] | Response:
    """The sign-in form's fields, read before any token is checked, so bounded: an
    ``application/x-www-form-urlencoded`` body (what the form sends) of at most
    :data:`SIGN_IN_BODY_LIMIT` bytes and :data:`SIGN_IN_FIELDS` fields. Anything else is answered
    (415, 413 or 400, naming the rule) without reading further: no upload reaches memory or disk."""

    def refused(status: int, message: str) -> Response:
        return JSONResponse({"error": "bad_sign_in", "message": message}, status_code=status)

    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return refused(
            415, f"the sign-in form takes an application/x-www-form-urlencoded body, not {kind or 'none'!r}"
        )
    too_large = refused(
        413,
        f"the sign-in form's body is over {SIGN_IN_BODY_LIMIT} bytes (the sign-in limit); send the token only",
    )
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.strip().isdigit() or int(declared) > SIGN_IN_BODY_LIMIT):
        return too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > SIGN_IN_BODY_LIMIT:
            return too_large
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=SIGN_IN_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return refused(
            400, f"the sign-in form's body is not UTF-8 URL-encoded text of at most {SIGN_IN_FIELDS} fields"
        )
    return dict(pairs)


class _Timelines:
    """The :class:`Timeline` of recently viewed runs, each folded forward from the store as far as a
    request needs (only the events after the newest one folded are read), at most
    :data:`KEPT_TIMELINES` runs. A timeline only grows with the run's durable log, so a kept one is
    never stale, only folded further. A timeline handed out may be folded further while it is read
    (times of calls its reader's state does not know yet, which the reader ignores)."""

    def __init__(self, service: WorkflowService) -> None:
        self.service = service
        self.kept: OrderedDict[str, Timeline] = OrderedDict()
        self.lock = threading.Lock()

    def upto(self, run_id: str, until: int) -> Timeline:
        """``run_id``'s timeline folded at least up to sequence ``until``."""
        with self.lock:
            timeline = self.kept.pop(run_id, None) or Timeline()
            while timeline.last_sequence < until:
                page = self.service.events(run_id, timeline.last_sequence, STREAM_BATCH * 10)
                if not page:
                    break
                timeline.fold(page, until=until)
            self.kept[run_id] = timeline
            while len(self.kept) > KEPT_TIMELINES:
                self.kept.popitem(last=False)
            return timeline


KEPT_TIMELINES = 64
"""Runs whose timelines the viewer keeps between requests."""


class _ResponseHeaders:
    """Every viewer answer carries ``X-Content-Type-Options: nosniff`` (read as the type it says, never
    sniffed into HTML: the data comes from workflows) and, except the static files, ``Cache-Control:
    no-store`` (run data stays out of browser and proxy caches); a header a route set is kept."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = "/static/" in str(scope.get("path", ""))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("x-content-type-options", "nosniff")
                if not static:
                    headers.setdefault("cache-control", "no-store")
            await send(message)

        await self.app(scope, receive, with_headers)


def viewer_app(service: WorkflowService, control: RunControl, *, base: str = "/ui") -> Starlette:
    """The viewer as an ASGI app to mount at ``base`` (see the module docstring for its routes)."""

    def visible(principal: Principal, run_id: str) -> bool:
        try:
            return principal.may_see(service.owner_of(run_id))
        except WorkflowNotFoundError:
            return False

    def guarded(handler: Callable[[Request, Principal], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            principal = _principal(request)
            if principal is None:
                return JSONResponse(
                    {"error": "unauthorized", "message": "sign in with the server's bearer token"},
                    status_code=401,
                )
            run_id = request.path_params.get("run_id")
            try:
                if run_id is not None and not await anyio.to_thread.run_sync(visible, principal, run_id):
                    return _not_visible(run_id)
                response: Response = await handler(request, principal)
            except StoreError as exc:  # the store cannot answer now (unreachable, refusing): say so
                return JSONResponse({"error": "store_error", "message": str(exc)}, status_code=503)
            return response

        return endpoint

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(
            text,
            status_code=status,
            headers={
                "content-security-policy": CSP,
                "x-content-type-options": "nosniff",
                "cache-control": "no-store",
            },
        )

    timelines = _Timelines(service)

    def prices() -> tuple[PriceTable | None, str | None]:
        # A price table that does not read prices nothing, and the page says why.
        try:
            return service.prices(), None
        except WorkflowMcpError as exc:
            return None, str(exc)

    def page_of(run_id: str, agents: bool = True) -> dict[str, Any]:
        state = service.current_status(run_id)
        table, problem = prices()
        view = run_view(state, timelines.upto(run_id, state.last_sequence), agents=agents, prices=table)
        view["pricesProblem"] = problem
        return view

    def summary_row(run_id: str, table: PriceTable | None) -> dict[str, Any]:
        state = service.current_status(run_id)
        return summary_view(state, timelines.upto(run_id, state.last_sequence), table)

    async def runs(request: Request, principal: Principal) -> Response:
        status = request.query_params.get("status") or None
        workflow = (request.query_params.get("workflow") or "").strip() or None
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        if status is not None and status not in RUN_STATUSES:
            return html(
                _pages.runs_page(
                    [], base=base, status=None, workflow=workflow, page=1, more=False, statuses=RUN_STATUSES
                ),
                400,
            )

        # Unfiltered, the newest runs up to this page (and one more, to know there is a next page) are
        # all it takes; a filter looks through the newest _SCAN runs.
        scan = _SCAN if status is not None or workflow is not None else min(_SCAN, page * PAGE_SIZE + 1)

        problem: list[str | None] = [None]

        def read() -> tuple[list[dict[str, Any]], bool]:
            listed = (
                service.list_runs_of(principal.owner, scan) if principal.scoped else service.list_runs(scan)
            )
            chosen = [
                r
                for r in listed
                if (status is None or r.status == status) and (workflow is None or workflow in r.workflow)
            ]
            start = (page - 1) * PAGE_SIZE
            window = chosen[start : start + PAGE_SIZE]
            rows = []
            table, problem[0] = prices()
            for r in window:
                row = summary_row(r.run_id, table)
                row["provider"] = row["provider"] or r.provider
                row["workflow"] = row["workflow"] or r.workflow
                rows.append(row)
            return rows, len(chosen) > start + PAGE_SIZE

        rows, more = await anyio.to_thread.run_sync(read)
        return html(
            _pages.runs_page(
                rows,
                base=base,
                status=status,
                workflow=workflow,
                page=page,
                more=more,
                statuses=RUN_STATUSES,
                prices_problem=problem[0],
            )
        )

    async def run_page(request: Request, principal: Principal) -> Response:
        view = await anyio.to_thread.run_sync(page_of, request.path_params["run_id"])
        return html(_pages.run_page(view, base=base, stream=True))

    async def run_json(request: Request, principal: Principal) -> Response:
        agents = request.query_params.get("agents") != "0"
        view = await anyio.to_thread.run_sync(page_of, request.path_params["run_id"], agents)
        return JSONResponse(view, headers={"cache-control": "no-store"})

    async def agent_json(request: Request, principal: Principal) -> Response:
        run_id, agent_id = request.path_params["run_id"], request.path_params["agent_id"]

        def read() -> dict[str, Any] | None:
            state = service.current_status(run_id)
            agent = state.agents.get(agent_id)
            if agent is None:
                return None
            timeline = timelines.upto(run_id, state.last_sequence)
            return agent_view(agent, timeline.agents.get(agent_id), timeline.provider, prices()[0])

        found = await anyio.to_thread.run_sync(read)
        if found is None:
            return JSONResponse(
                {"error": "not_found", "message": f"run {run_id} has no agent {agent_id!r}"}, 404
            )
        return JSONResponse(found)

    async def events(request: Request, principal: Principal) -> Response:
        run_id = request.path_params["run_id"]
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            after = int(raw)
            if after < 0:
                raise ValueError(raw)
        except ValueError:
            return JSONResponse(
                {
                    "error": "invalid_cursor",
                    "message": f"the event cursor {raw!r} must be a non-negative integer "
                    "(the sequence of the last event seen)",
                },
                status_code=400,
            )

        async def stream() -> AsyncIterator[ServerSentEvent]:
            cursor = after
            while True:
                batch = await service.wait_events(run_id, cursor, STREAM_BATCH, wait_ms=STREAM_WAIT_MS)
                for event in batch:
                    cursor = event.sequence
                    yield ServerSentEvent(
                        data=json.dumps(event_view(event)), id=str(event.sequence), event="run-event"
                    )
                if len(batch) < STREAM_BATCH and service.run_status(run_id) in TERMINAL:
                    rest = service.events(run_id, cursor, STREAM_BATCH)  # committed with the end
                    if not rest:
                        yield ServerSentEvent(data=json.dumps({"after": cursor}), event="end")
                        return

        return EventSourceResponse(stream(), ping=15, headers={"cache-control": "no-store"})

    def _unsafe_origin(request: Request) -> bool:
        # A cookie rides along on any request the browser makes; an action must come from our own page.
        if request.headers.get("authorization"):
            return False
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        return origin is None or host is None or origin.split("://", 1)[-1] != host

    async def cancel(request: Request, principal: Principal) -> Response:
        if _unsafe_origin(request):
            return JSONResponse(
                {"error": "forbidden_origin", "message": "actions must come from the run page"}, 403
            )
        try:
            outcome = await control.cancel_run(principal, request.path_params["run_id"])
        except WorkflowMcpError as exc:
            return JSONResponse({"error": "refused", "message": str(exc)}, status_code=409)
        return JSONResponse({"outcome": outcome})

    async def resume(request: Request, principal: Principal) -> Response:
        if _unsafe_origin(request):
            return JSONResponse(
                {"error": "forbidden_origin", "message": "actions must come from the run page"}, 403
            )
        try:
            new_id = await control.resume_run(principal, request.path_params["run_id"])
        except WorkflowMcpError as exc:
            return JSONResponse({"error": "refused", "message": str(exc)}, status_code=409)
        return JSONResponse({"runId": new_id, "url": f"{base}/runs/{new_id}"})

    async def login(request: Request) -> Response:
        # Reached without a principal (HttpGuard lets /login through); the token is checked there too.
        if request.method == "GET":
            return html(_pages.login_page(base=base, next_path=request.query_params.get("next", "")))
        fields = await _sign_in_fields(request)
        if isinstance(fields, Response):
            return fields
        token = fields.get("token", "").strip()
        target = fields.get("next", "")
        # Only back into the viewer: a path as the browser will resolve it (dot segments, %2e, a
        # backslash read as a slash) that stays under the viewer's base.
        resolved = posixpath.normpath(unquote(target).replace("\\", "/")) + (
            "/" if target.endswith("/") else ""
        )
        if not target.startswith(base + "/") or not resolved.startswith(base + "/") or "\\" in target:
            target = base + "/"
        sign_in = request.scope.get("state", {}).get(TOKEN_CHECK_KEY)
        signed = sign_in(token) if token and callable(sign_in) else None
        if signed is None:
            return html(
                _pages.login_page(
                    base=base, error="That token is not valid for this server.", next_path=target
                ),
                401,
            )
        name, session = signed
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(name, session, httponly=True, samesite="strict", path=base)
        return response

    return Starlette(
        middleware=[Middleware(_ResponseHeaders)],
        routes=[
            Route("/", guarded(runs)),
            Route("/runs/{run_id}", guarded(run_page)),
            Route("/api/runs/{run_id}", guarded(run_json)),
            Route("/api/runs/{run_id}/agents/{agent_id}", guarded(agent_json)),
            Route("/api/runs/{run_id}/events", guarded(events)),
            Route("/api/runs/{run_id}/cancel", guarded(cancel), methods=["POST"]),
            Route("/api/runs/{run_id}/resume", guarded(resume), methods=["POST"]),
            Route("/login", login, methods=["GET", "POST"]),
            Mount("/static", StaticFiles(directory=str(_STATIC)), name="static"),
        ],
    )
