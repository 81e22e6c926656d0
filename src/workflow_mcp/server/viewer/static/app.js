// workflow-mcp run viewer as an MCP App (the `io.modelcontextprotocol/ui` extension): the host renders
// this page beside a workflow_run / workflow_run_status result, sends it that result
// (ui/notifications/tool-result), and relays its workflow_run_status calls while the run goes on.
(function () {
  "use strict";
  const PROTOCOL = "2026-01-26";
  const TERMINAL = new Set(["completed", "failed", "cancelled", "interrupted", "paused"]);
  let nextId = 1;
  const pending = new Map();
  let runId = null;
  let timer = null;

  function send(message) {
    window.parent.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
  }
  function request(method, params) {
    const id = nextId++;
    send({ id: id, method: method, params: params });
    return new Promise((resolve, reject) => pending.set(id, { resolve: resolve, reject: reject }));
  }
  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text != null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function render(result) {
    const data = result && result.structuredContent;
    if (!data || !data.runId) return;
    runId = data.runId;
    const root = document.getElementById("app");
    root.dataset.runId = runId;
    const status = data.status || "queued";
    const head = el("h1", (data.workflow || "Run") + " ");
    head.appendChild(el("span", status, "status status-" + status));
    const parts = [head, el("p", "Run " + runId)];
    const c = data.counts;
    if (c) {
      parts.push(el("p", "Agents: " + c.completed + " completed, " + c.cached + " replayed, " + c.failed +
        " failed, " + c.cancelled + " cancelled, " + c.running + " running, " + c.queued + " queued.", "counts"));
    }
    if (data.tokenUsage) parts.push(el("p", "Tokens: " + data.tokenUsage.input + " in / " + data.tokenUsage.output + " out"));
    if (data.pausedReason) parts.push(el("p", "Paused: " + data.pausedReason + ". Resume with workflow-mcp resume " + runId, "banner"));
    if (data.phases && data.phases.length) {
      const list = el("ul", null, "phases");
      for (const p of data.phases) list.appendChild(el("li", p.title + ": " + p.status));
      parts.push(el("h2", "Phases"), list);
    }
    if (data.recentCalls && data.recentCalls.length) {
      const list = el("ol", null, "calls");
      for (const a of data.recentCalls) {
        const li = el("li", null, "call");
        li.dataset.state = a.state;
        li.append(el("span", a.label || a.agentId), " — ", el("span", a.state, "state"));
        list.appendChild(li);
      }
      parts.push(el("h2", "Agents"), list);
    }
    if (data.logTail && data.logTail.length) {
      const list = el("ol", null, "logs");
      for (const line of data.logTail) list.appendChild(el("li", line));
      parts.push(el("h2", "Log"), list);
    }
    root.replaceChildren(...parts);
    clearTimeout(timer);
    if (!TERMINAL.has(status) && data.terminal !== true) timer = setTimeout(poll, 2000);
  }

  async function poll() {
    if (!runId) return;
    try {
      render(await request("tools/call", { name: "workflow_run_status", arguments: { runId: runId } }));
    } catch (e) {
      timer = setTimeout(poll, 5000);
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.id != null && pending.has(m.id) && !m.method) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      m.error ? p.reject(new Error(m.error.message)) : p.resolve(m.result);
    } else if (m.method === "ui/notifications/tool-result") {
      render(m.params);
    }
  });

  request("ui/initialize", {
    appCapabilities: {},
    appInfo: { name: "workflow-mcp run viewer", version: "1" },
    protocolVersion: PROTOCOL,
  }).then(() => send({ method: "ui/notifications/initialized", params: {} }));
})();
