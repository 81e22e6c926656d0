"""The run viewer MCP App in headless Chromium under a stand-in host page: it connects to the host
(``ui/initialize``), renders the run named by the tool result it is sent (real ``workflow_run_status``
results of a real run), and follows it through the host with ``workflow_run_status`` until it ends."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult
from viewer_kit import CHROMIUM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "server"))

from workflow_mcp.server.viewer._mcp_app import run_app_html

from mcp_kit import call, connect, make_env

playwright_sync = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")

HELLO = """export const meta = { name: 'hello', description: 'greets', phases: [{ title: 'Greet' }] }
phase('Greet')
const a = await agent('hello', { label: 'greet' })
log('greeted ' + a)
return a
"""

HOST = """<!doctype html><html><body><iframe id="app" title="run"></iframe><script>
const results = JSON.parse(document.currentScript.dataset.results);
const frame = document.getElementById('app');
window.calls = [];
window.addEventListener('message', (event) => {
  const m = event.data;
  const reply = (result) => frame.contentWindow.postMessage({ jsonrpc: '2.0', id: m.id, result }, '*');
  if (m.method === 'ui/initialize') {
    window.initialize = m.params;
    reply({ protocolVersion: m.params.protocolVersion, hostCapabilities: {}, hostInfo: { name: 'test host', version: '1' }, hostContext: {} });
  } else if (m.method === 'ui/notifications/initialized') {
    frame.contentWindow.postMessage({ jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: results.first }, '*');
  } else if (m.method === 'tools/call') {
    window.calls.push(m.params);
    reply(results.later);
  }
});
frame.srcdoc = document.currentScript.dataset.app;
</script></body></html>"""


async def real_results(tmp_path: Path) -> dict[str, Any]:
    env = make_env(tmp_path)
    env.workflow("hello", HELLO)
    try:
        async with connect(env.trusted_server()) as client:
            script = {"default": {"delayMs": 1500, "text": "hi"}}
            run = await call(
                client, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": script}
            )
            rid = run.structured_content["runId"]
            first = await call(client, "workflow_run_status", {"runId": rid})
            await call(client, "workflow_run_await", {"runId": rid, "waitMs": 20_000})
            later = await call(client, "workflow_run_status", {"runId": rid})
    finally:
        await env.service.shutdown("the test ended", timeout_s=10)

    def dump(r: CallToolResult) -> dict[str, Any]:
        return r.model_dump(mode="json", by_alias=True, exclude_none=True)

    return {"runId": rid, "first": dump(first), "later": dump(later)}


def test_the_app_renders_the_run_of_the_tool_result_and_follows_it_to_its_end(tmp_path: Path) -> None:
    results = asyncio.run(real_results(tmp_path))
    assert results["first"]["structuredContent"]["status"] in ("queued", "running")
    host = HOST.replace(
        "<script>",
        "<script data-results='"
        + json.dumps(results).replace("&", "&amp;").replace("'", "&#39;")
        + "' data-app='"
        + run_app_html().replace("&", "&amp;").replace("'", "&#39;")
        + "'>",
        1,
    )
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.set_content(host)
            app = page.frame_locator("#app")
            rid = results["runId"]
            playwright_sync.expect(app.locator("main#app")).to_have_attribute(
                "data-run-id", rid, timeout=10_000
            )
            playwright_sync.expect(app.locator("h1 .status")).to_have_text("completed", timeout=10_000)
            assert "greet — completed" in app.locator("ol.calls").inner_text()
            assert "greeted hi" in app.locator("ol.logs").inner_text()
            assert page.evaluate("window.initialize.appInfo.name") == "workflow-mcp run viewer"
            assert page.evaluate("window.calls") == [
                {"name": "workflow_run_status", "arguments": {"runId": rid}}
            ]
        finally:
            browser.close()
