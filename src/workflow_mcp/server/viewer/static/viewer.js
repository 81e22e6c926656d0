// workflow-mcp run viewer: follows one run through its durable event stream (Server-Sent Events,
// resumed after the last sequence seen, so a reconnect or a reload neither misses nor repeats an
// event) and re-reads the service's projected state for counts, tokens and the result.
(function () {
  "use strict";

  const login = document.getElementById("login");
  if (login) {
    const found = /(?:^|&)token=([^&]+)/.exec(location.hash.slice(1));
    if (found) {
      history.replaceState(null, "", location.pathname + location.search);
      login.elements.token.value = decodeURIComponent(found[1]);
      login.submit();
    }
    return;
  }
  const root = document.getElementById("run");
  if (!root) return;

  const boot = JSON.parse(root.dataset.boot);
  const api = boot.base + "/api/runs/" + encodeURIComponent(boot.runId);
  const FINISHED = new Set(["completed", "failed", "cancelled", "cached"]);
  const TERMINAL_EVENTS = new Set(["run.completed", "run.failed", "run.cancelled", "run.interrupted", "run.paused"]);
  const lanesEl = document.getElementById("lanes");
  const agents = new Map();
  const lanes = new Map();
  let t0 = boot.startedAt;
  let tEnd = boot.endedAt;
  let terminal = boot.terminal;
  let lastSeq = boot.after;
  let latest = null;
  let gaps = 0;
  let dups = 0;
  let applied = 0;
  // The time axis: "--span" (ms, on the lanes) changes only in steps, and "--now" is set on the rows
  // of unfinished calls alone, so a new event restyles the rows it changes, not every bar on the page.
  let span = 0;
  const open = new Set();
  let frame = 0;

  function text(el, value) {
    if (el && el.textContent !== value) el.textContent = value;
  }

  function setTimes(a) {
    const s = a.el.style;
    const rel = (v) => String(v - t0);
    if (t0 == null) return;
    a.queued != null ? s.setProperty("--q", rel(a.queued)) : s.removeProperty("--q");
    a.started != null ? s.setProperty("--s", rel(a.started)) : s.removeProperty("--s");
    a.ended != null ? s.setProperty("--e", rel(a.ended)) : s.removeProperty("--e");
  }

  function setState(a, state) {
    if (FINISHED.has(state)) {
      if (open.delete(a)) a.el.style.removeProperty("--now");
    } else open.add(a);
    if (a.state === state) return;
    const lane = lanes.get(a.phase);
    if (lane) lane.done += (FINISHED.has(state) ? 1 : 0) - (FINISHED.has(a.state) ? 1 : 0);
    a.state = state;
    a.el.dataset.state = state;
    text(a.el.querySelector(".state"), state);
    if (lane) laneCount(lane);
  }

  function laneCount(lane) {
    text(lane.count, lane.done + "/" + lane.total + " done");
  }

  function laneOf(title) {
    let lane = lanes.get(title);
    if (lane) return lane;
    const index = lanes.size;
    const section = document.createElement("section");
    section.className = "lane";
    section.dataset.phase = title;
    section.setAttribute("aria-labelledby", "lane-" + index);
    section.innerHTML = '<h3><span class="phase-title"></span> <span class="phase-status">—</span> <span class="lane-count"></span></h3><ol class="bars"></ol>';
    section.querySelector("h3").id = "lane-" + index;
    section.querySelector(".phase-title").textContent = title;
    lanesEl.appendChild(section);
    return adoptLane(section);
  }

  function adoptLane(section) {
    const lane = {
      el: section,
      list: section.querySelector("ol.bars"),
      status: section.querySelector(".phase-status"),
      count: section.querySelector(".lane-count"),
      done: 0,
      total: 0,
    };
    lanes.set(section.dataset.phase, lane);
    return lane;
  }

  function adoptAgent(li, phase) {
    const num = (v) => (v === undefined ? null : Number(v));
    const a = {
      id: li.dataset.agentId,
      el: li,
      button: li.querySelector("button"),
      label: li.querySelector("button").textContent,
      phase: phase,
      state: li.dataset.state,
      queued: num(li.dataset.queued),
      started: num(li.dataset.started),
      ended: num(li.dataset.ended),
    };
    a.button.addEventListener("click", () => showDetails(a.id));
    if (!FINISHED.has(a.state)) open.add(a);
    agents.set(a.id, a);
    return a;
  }

  function agentOf(id, label, phase) {
    let a = agents.get(id);
    if (a) return a;
    const lane = laneOf(phase || "(no phase)");
    const li = document.createElement("li");
    li.className = "agent";
    li.id = "agent-" + id;
    li.dataset.agentId = id;
    li.dataset.state = "queued";
    li.innerHTML = '<button type="button" class="agent-open" aria-controls="details"></button><span class="track" aria-hidden="true"><span class="bar"><span class="queue"></span><span class="work"></span></span></span><span class="state">queued</span>';
    li.querySelector("button").textContent = label || id;
    lane.list.appendChild(li);
    a = adoptAgent(li, lane.el.dataset.phase);
    lane.total += 1;
    laneCount(lane);
    return a;
  }

  for (const section of lanesEl.querySelectorAll("section.lane")) {
    const lane = adoptLane(section);
    for (const li of section.querySelectorAll("li.agent")) {
      const a = adoptAgent(li, section.dataset.phase);
      lane.total += 1;
      if (FINISHED.has(a.state)) lane.done += 1;
    }
  }

  function clock() {
    if (t0 == null) return;
    let now = terminal && tEnd != null ? tEnd - t0 : Math.max(Date.now() - t0, latest == null ? 0 : latest - t0);
    now = Math.max(now, 1);
    // The axis ends at the run's end once it has ended; while it runs, a quarter past now, grown only
    // when now reaches it (every bar is rescaled then, a few times in a run's life).
    const wanted = terminal ? now : now > span ? Math.ceil(now * 1.25) : span;
    if (wanted !== span) {
      span = wanted;
      lanesEl.style.setProperty("--span", String(span));
    }
    const value = String(now);
    for (const a of open) a.el.style.setProperty("--now", value);
    if (!terminal) text(document.getElementById("duration"), (now / 1000).toFixed(1) + " s");
  }

  // Events that arrive together are drawn together: one clock update per frame.
  function clockSoon() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      clock();
    });
  }

  function apply(ev) {
    if (ev.sequence <= lastSeq) {
      dups += 1;
      return;
    }
    if (ev.sequence !== lastSeq + 1) gaps += 1;
    lastSeq = ev.sequence;
    applied += 1;
    if (ev.at != null) latest = Math.max(latest || 0, ev.at);
    const p = ev.payload || {};
    const type = ev.type;
    if (type === "run.started" || type === "run.resumed") {
      if (t0 == null) {
        t0 = ev.at;
        for (const a of agents.values()) setTimes(a);
      }
    }
    if (type.startsWith("agent.") && ev.agentId) {
      const a = agentOf(ev.agentId, p.label, p.phase || ev.phase);
      if (type === "agent.queued") {
        a.queued = ev.at;
        setState(a, "queued");
      } else if (type === "agent.started") {
        a.started = ev.at;
        if (a.queued == null) a.queued = ev.at;
        setState(a, "running");
      } else if (type === "agent.completed" || type === "agent.cached" || type === "agent.failed") {
        a.ended = ev.at;
        if (a.queued == null) a.queued = ev.at;
        if (a.started == null) a.started = ev.at;
        setState(a, type === "agent.completed" ? "completed" : type === "agent.cached" ? "cached" : p.reason === "cancelled" ? "cancelled" : "failed");
      }
      setTimes(a);
    } else if (type.startsWith("phase.") && p.title) {
      const lane = laneOf(p.title);
      const status = type === "phase.started" ? (p.source === "meta" ? "pending" : "running") : type === "phase.completed" ? "completed" : "failed";
      if (!(type === "phase.started" && p.source === "meta" && lane.status.textContent !== "—")) text(lane.status, status);
    } else if (type === "log") {
      const li = document.createElement("li");
      li.textContent = p.message || "";
      document.getElementById("logs").appendChild(li);
    } else if (TERMINAL_EVENTS.has(type)) {
      terminal = true;
      tEnd = ev.at;
      text(document.getElementById("live"), "");
    }
    if (type.startsWith("run.")) {
      const status = { "run.started": "running", "run.resumed": "running", "run.paused": "paused", "run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled", "run.interrupted": "interrupted" }[type];
      if (status) setStatus(status);
    }
  }

  function setStatus(status) {
    const badge = document.getElementById("run-status");
    badge.className = "status status-" + status;
    text(badge, status);
  }

  function publish() {
    root.dataset.lastSequence = String(lastSeq);
    root.dataset.gaps = String(gaps);
    root.dataset.duplicates = String(dups);
    root.dataset.applied = String(applied);
  }

  let refreshTimer = null;
  function refreshSoon(delay) {
    if (refreshTimer != null) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      refresh();
    }, delay);
  }

  function money(amount, currency) {
    return amount == null ? "—" : amount.toLocaleString("en-US", { minimumFractionDigits: 4, maximumFractionDigits: 4 }) + " " + currency;
  }

  function tokensRows(id, rows, currency) {
    const body = document.querySelector("#" + id + " tbody");
    body.replaceChildren();
    for (const r of rows) {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = r.name;
      tr.appendChild(th);
      for (const v of [r.agents, r.input, r.output, money(r.cost, currency)]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
  }

  // While the run goes on, only the summary (counts, tokens, phases, result); once it has ended, the
  // whole view, whose agent states are the service's final word (also for calls the end cancelled).
  async function refresh() {
    let view;
    try {
      const response = await fetch(terminal ? api : api + "?agents=0", { headers: { accept: "application/json" } });
      if (!response.ok) return;
      view = await response.json();
    } catch (e) {
      return;
    }
    const c = view.counts;
    text(document.getElementById("agents-done"), view.done + "/" + view.total);
    text(document.getElementById("agents-running"), String(c.running));
    text(document.getElementById("agents-queued"), String(c.queued));
    text(document.getElementById("agents-failed"), String(c.failed));
    const u = view.tokenUsage;
    text(document.getElementById("tokens"), u.input + " in / " + u.output + " out (+" + u.replayedOutput + " replayed)");
    text(document.getElementById("cost"), money(view.cost, view.currency));
    tokensRows("tokens-phase", view.tokensByPhase, view.currency);
    tokensRows("tokens-provider", view.tokensByProvider, view.currency);
    if (view.lastSequence >= lastSeq && view.agents.length) {
      // The service's projection is authoritative: it also cancels calls left open by the run's end.
      for (const v of view.agents) {
        const a = agentOf(v.agentId, v.label, v.phase);
        a.queued = v.queuedAt;
        a.started = v.startedAt;
        a.ended = v.endedAt;
        setState(a, v.state);
        setTimes(a);
      }
      setStatus(view.status);
      for (const l of view.lanes) if (l.status) text(laneOf(l.title).status, l.status);
      if (view.terminal) {
        terminal = true;
        tEnd = view.endedAt;
      }
    }
    if (view.startedAt != null && t0 == null) t0 = view.startedAt;
    document.getElementById("cancel").hidden = view.terminal;
    document.getElementById("resume").hidden = !view.resumable;
    const banner = document.getElementById("banner");
    banner.replaceChildren();
    if (view.status === "paused") {
      const p = document.createElement("p");
      p.innerHTML = "<strong>Paused:</strong> <span></span> Resume it with <code></code> or the Resume button.";
      p.querySelector("span").textContent = (view.pausedReason || "paused") + "." + (view.resetsAt ? " The limit resets at " + view.resetsAt + "." : "");
      p.querySelector("code").textContent = "workflow-mcp resume " + view.runId;
      banner.appendChild(p);
    }
    if (view.result != null && !document.querySelector("#result .json")) {
      const details = document.getElementById("result");
      details.replaceChildren();
      const summary = document.createElement("summary");
      summary.textContent = "Result (JSON" + (view.resultTruncated ? ", cut" : "") + ")";
      const holder = document.createElement("div");
      holder.className = "json";
      holder.dataset.json = view.result;
      const pre = document.createElement("pre");
      pre.textContent = view.result;
      holder.appendChild(pre);
      details.append(summary, holder);
      details.open = true;
      jsonTree(holder);
    }
    if (view.error && !document.getElementById("run-error")) {
      const p = document.createElement("p");
      p.className = "error";
      p.id = "run-error";
      p.innerHTML = "<strong>Error:</strong> ";
      p.append(view.error.message);
      document.querySelector(".actions").after(p);
    }
    clockSoon();
    publish();
  }

  // The final result as a tree of <details> (keyboard-usable: each summary is focusable).
  function jsonTree(holder) {
    let value;
    try {
      value = JSON.parse(holder.dataset.json);
    } catch (e) {
      return; // cut at the size limit: the text stays as it is
    }
    let budget = 5000;
    function node(key, v, depth) {
      budget -= 1;
      const label = key == null ? "" : key + ": ";
      if (v !== null && typeof v === "object" && budget > 0) {
        const d = document.createElement("details");
        d.open = depth < 2;
        const s = document.createElement("summary");
        const n = Array.isArray(v) ? v.length : Object.keys(v).length;
        s.textContent = label + (Array.isArray(v) ? "[" + n + " items]" : "{" + n + " keys}");
        d.appendChild(s);
        const list = document.createElement("ul");
        for (const [k, child] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
          const li = document.createElement("li");
          li.appendChild(node(String(k), child, depth + 1));
          list.appendChild(li);
        }
        d.appendChild(list);
        return d;
      }
      const span = document.createElement("span");
      span.textContent = label + JSON.stringify(v);
      return span;
    }
    holder.replaceChildren(node(null, value, 0));
  }

  async function showDetails(id) {
    const box = document.getElementById("details");
    let a;
    try {
      const response = await fetch(api + "/agents/" + encodeURIComponent(id));
      a = await response.json();
      if (!response.ok) throw new Error(a.message);
    } catch (e) {
      box.textContent = "Could not read the agent: " + e.message;
      return;
    }
    const secs = (from, to) => (from != null && to != null ? ((to - from) / 1000).toFixed(2) + " s" : "—");
    const rows = [
      ["Label", a.label],
      ["Agent", a.agentId],
      ["Phase", a.phase],
      ["State", a.state + (a.cached ? " (replayed)" : "")],
      ["Provider", a.provider || "—"],
      ["Model", a.model || "—"],
      ["Queued for", secs(a.queuedAt, a.startedAt)],
      ["Ran for", secs(a.startedAt, a.endedAt)],
      ["Tokens", (a.tokens.input || 0) + " in / " + (a.tokens.output || 0) + " out"],
      ["Cost", money(a.cost, boot.currency)],
      ["Prompt preview", a.promptPreview || "—"],
      ["Result preview", a.preview || "—"],
      ["Error", a.error || "—"],
    ];
    const dl = document.createElement("dl");
    dl.className = "agent-details";
    for (const [k, v] of rows) {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      dl.append(dt, dd);
    }
    box.replaceChildren(dl);
  }

  async function act(path, what) {
    const status = document.getElementById("action-status");
    status.textContent = what + "…";
    try {
      const response = await fetch(api + "/" + path, { method: "POST" });
      const body = await response.json();
      if (!response.ok) {
        status.textContent = what + " refused: " + body.message;
        return null;
      }
      return body;
    } catch (e) {
      status.textContent = what + " failed: " + e.message;
      return null;
    }
  }

  const dialog = document.getElementById("confirm-cancel");
  document.getElementById("cancel").addEventListener("click", () => dialog.showModal());
  dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "yes") return;
    const body = await act("cancel", "Cancelling");
    if (body) document.getElementById("action-status").textContent = "Cancel: " + body.outcome;
    refreshSoon(300);
  });
  document.getElementById("resume").addEventListener("click", async () => {
    const body = await act("resume", "Resuming");
    if (!body) return;
    const status = document.getElementById("action-status");
    status.textContent = "Resumed as ";
    const link = document.createElement("a");
    link.href = body.url;
    link.textContent = body.runId;
    status.appendChild(link);
  });

  for (const holder of document.querySelectorAll("#result .json")) jsonTree(holder);
  for (const a of agents.values()) setTimes(a);
  clock();
  publish();
  setInterval(() => {
    if (!terminal) clock();
  }, 1000);

  if (boot.stream && !boot.terminal) {
    const source = new EventSource(api + "/events?after=" + boot.after);
    source.addEventListener("run-event", (message) => {
      const ev = JSON.parse(message.data);
      apply(ev);
      clockSoon(); // the axis reaches the newest event in the next frame
      publish();
      // Counts and tokens follow within a quarter of a second; a big run's summary once a second.
      refreshSoon(TERMINAL_EVENTS.has(ev.type) ? 0 : agents.size > 200 ? 1000 : 250);
    });
    source.addEventListener("end", () => {
      source.close();
      terminal = true;
      text(document.getElementById("live"), "");
      refreshSoon(0);
    });
    source.addEventListener("open", () => text(document.getElementById("live"), "Live"));
    source.addEventListener("error", () => {
      if (!terminal) text(document.getElementById("live"), "Reconnecting…");
    });
  }
})();
