"""The run viewer as an MCP App: one ``ui://`` resource (``text/html;profile=mcp-app``, the ``mcp`` SDK's
Apps extension, :mod:`mcp.server.apps`) that ``workflow_run`` and ``workflow_run_status`` name in their
``_meta.ui.resourceUri``. A host that renders Apps shows it beside the result, sends it the result
(``ui/notifications/tool-result``: the run's id, status, phases, calls, logs and tokens, as bounded and
redacted as the text) and relays its ``workflow_run_status`` calls until the run ends; a host that does
not still gets the whole text result.

The page is self-contained (its script and style sheet inlined; it loads nothing and connects nowhere:
its ``_meta.ui.csp`` names no domain).
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.apps import Apps, ResourceCsp

__all__ = ["RUN_APP_TOOLS", "RUN_APP_URI", "run_app", "run_app_html"]

RUN_APP_URI = "ui://workflow-mcp/run-viewer.html"
"""The App resource's URI."""
RUN_APP_TOOLS = ("workflow_run", "workflow_run_status")
"""The tools whose results the App renders."""
_STATIC = Path(__file__).with_name("static")


def run_app_html() -> str:
    """The App's HTML document, with its script and style sheet inlined."""
    style = (_STATIC / "viewer.css").read_text("utf-8")
    script = (_STATIC / "app.js").read_text("utf-8")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>workflow-mcp run</title>'
        f'<style>{style}</style></head><body><main id="app" aria-live="polite">'
        "<p>Waiting for the run…</p></main>"
        f"<script>{script}</script></body></html>"
    )


def run_app() -> Apps:
    """The Apps extension holding the run viewer resource (pass it to ``MCPServer(extensions=…)``)."""
    apps = Apps()
    apps.add_html_resource(
        RUN_APP_URI,
        run_app_html(),
        name="run-viewer",
        title="Run viewer",
        description="A live view of one workflow run (phases, agents, log, tokens) for hosts that render MCP Apps.",
        csp=ResourceCsp(connect_domains=[], resource_domains=[]),
        prefers_border=True,
    )
    return apps
