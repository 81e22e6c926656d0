"""The run viewer: a web page per run (phases as swimlanes, agents as bars on a time axis, logs,
tokens, result, Cancel and Resume), live through the durable event cursor, and the same page as an
MCP App resource.

It is served under :data:`VIEWER_BASE` by ``workflow-mcp serve --http`` (behind the same bearer-token
guard, each client seeing only its own runs) and by ``workflow-mcp ui`` (loopback, the local user).
It reaches the runtime only through :class:`~workflow_mcp.service.WorkflowService`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._mcp_app import RUN_APP_TOOLS, RUN_APP_URI, run_app
from ._view import Timeline, event_view, run_view, summary_view

if TYPE_CHECKING:
    from ._app import COOKIE, CSP, PAGE_SIZE, TOKEN_CHECK_KEY, LocalControl, RunControl, viewer_app

_WEB_APP = frozenset(
    {"COOKIE", "CSP", "PAGE_SIZE", "TOKEN_CHECK_KEY", "LocalControl", "RunControl", "viewer_app"}
)
"""Names of the web application (:mod:`._app`), imported on first use: it loads Starlette's HTTP stack,
which a stdio server (that serves only the MCP App resource) must not pay for at start-up."""

__all__ = [
    "COOKIE",
    "CSP",
    "PAGE_SIZE",
    "RUN_APP_TOOLS",
    "RUN_APP_URI",
    "TOKEN_CHECK_KEY",
    "VIEWER_BASE",
    "LocalControl",
    "RunControl",
    "Timeline",
    "event_view",
    "run_app",
    "run_view",
    "summary_view",
    "viewer_app",
]

VIEWER_BASE = "/ui"
"""The path the viewer is mounted at."""


def __getattr__(name: str) -> Any:
    if name in _WEB_APP:
        from . import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
