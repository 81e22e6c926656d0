"""The viewer's server-rendered HTML: the runs page, a run page, the sign-in page.

Every value is escaped (:func:`html.escape`) where it is written; the pages load only the viewer's own
``/ui/static`` files (no CDN, no external request; the Content-Security-Policy header says so). The
markup is for people and assistive technology alike: landmarks (``header``/``main``/``nav``), a label
for every control, buttons for every action (keyboard-usable), and each status written as text beside
its colour.
"""

from __future__ import annotations

import datetime
import json
from html import escape
from typing import Any
from urllib.parse import urlencode

__all__ = ["login_page", "run_page", "runs_page", "status_badge"]


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _doc(title: str, body: str, *, base: str, script: bool = True) -> str:
    js = f'<script src="{base}/static/viewer.js" defer></script>' if script else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)} — workflow-mcp</title>"
        f'<link rel="stylesheet" href="{base}/static/viewer.css">{js}</head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header role="banner"><nav aria-label="Site"><a href="{base}/">workflow-mcp runs</a></nav></header>'
        f'<main id="main" tabindex="-1">{body}</main></body></html>'
    )


def status_badge(status: str, *, element_id: str | None = None) -> str:
    """A status as text in a coloured badge (the colour repeats the text, never replaces it)."""
    ident = f' id="{_e(element_id)}"' if element_id else ""
    return f'<span{ident} class="status status-{_e(status)}">{_e(status)}</span>'


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(start: int | None, end: int | None) -> str:
    if start is None or end is None:
        return ""
    seconds = max(0, end - start) / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def runs_page(
    rows: list[dict[str, Any]],
    *,
    base: str,
    status: str | None,
    workflow: str | None,
    page: int,
    more: bool,
    statuses: tuple[str, ...],
    prices_problem: str | None = None,
) -> str:
    """The runs page: a filter form (status, workflow), a table of ``rows`` (newest first; each
    ``{runId, status, workflow, provider, startedAt, endedAt, done, total, tokenUsage, cost,
    currency}``; a cost the price table does not know is shown as "—") and previous/next links;
    ``prices_problem`` says why no cost is known (a price table that does not read)."""
    options = "".join(
        f'<option value="{_e(s)}"{" selected" if s == status else ""}>{_e(s or "any")}</option>'
        for s in ("", *statuses)
    )
    form = (
        f'<form class="filters" method="get" action="{base}/" role="search" aria-label="Filter runs">'
        f'<label for="f-status">Status</label><select id="f-status" name="status">{options}</select>'
        f'<label for="f-workflow">Workflow</label>'
        f'<input id="f-workflow" name="workflow" value="{_e(workflow or "")}" placeholder="name">'
        '<button type="submit">Filter</button></form>'
    )
    body_rows = []
    for r in rows:
        tokens = r["tokenUsage"]
        body_rows.append(
            "<tr>"
            f'<td><a href="{base}/runs/{_e(r["runId"])}">{_e(r["runId"])}</a></td>'
            f"<td>{status_badge(r['status'])}</td>"
            f"<td>{_e(r['workflow'])}</td><td>{_e(r['provider'])}</td>"
            f"<td>{_e(_when(r['startedAt']))}</td><td>{_e(_duration(r['startedAt'], r['endedAt']))}</td>"
            f"<td>{r['done']}/{r['total']}</td>"
            f"<td>{tokens.get('input', 0)} in / {tokens.get('output', 0)} out</td>"
            f"<td>{_e(money(r.get('cost'), r.get('currency', '')))}</td>"
            "</tr>"
        )
    table = (
        '<table class="runs"><caption>Runs, newest first</caption><thead><tr>'
        '<th scope="col">Run</th><th scope="col">Status</th><th scope="col">Workflow</th>'
        '<th scope="col">Provider</th><th scope="col">Started</th><th scope="col">Duration</th>'
        '<th scope="col">Agents done</th><th scope="col">Tokens</th><th scope="col">Cost</th></tr></thead>'
        f"<tbody>{''.join(body_rows) or '<tr><td colspan=9>No runs.</td></tr>'}</tbody></table>"
    )

    def link(to: int, text: str) -> str:
        query = {k: v for k, v in (("status", status), ("workflow", workflow)) if v}
        query["page"] = str(to)
        return f'<a href="{base}/?{_e(urlencode(query))}" rel="{"prev" if to < page else "next"}">{text}</a>'

    pager = " ".join(
        part
        for part in (
            link(page - 1, "Newer runs") if page > 1 else "",
            link(page + 1, "Older runs") if more else "",
        )
        if part
    )
    nav = f'<nav class="pager" aria-label="Pages">{pager}</nav>' if pager else ""
    notice = _prices_notice(prices_problem)
    return _doc("Runs", f"<h1>Runs</h1>{form}{notice}{table}{nav}", base=base, script=False)


def money(amount: float | None, currency: str) -> str:
    """An amount as the pages show it (``0.0123 USD``), or "—" when it is not known."""
    if amount is None:
        return "—"
    return f"{amount:,.4f} {currency}".strip()


def _prices_notice(problem: str | None) -> str:
    if problem is None:
        return ""
    return f'<p class="error" id="prices-problem">No cost is shown: the price table {_e(problem)}</p>'


def _lane(lane: dict[str, Any], agents: dict[str, dict[str, Any]], index: int) -> str:
    items = "".join(_bar(agents[a]) for a in lane["agentIds"])
    done = sum(
        1 for a in lane["agentIds"] if agents[a]["state"] in ("completed", "failed", "cancelled", "cached")
    )
    status = lane["status"] or "—"
    return (
        f'<section class="lane" aria-labelledby="lane-{index}" data-phase="{_e(lane["title"])}">'
        f'<h3 id="lane-{index}">{_e(lane["title"])} <span class="phase-status">{_e(status)}</span> '
        f'<span class="lane-count">{done}/{len(lane["agentIds"])} done</span></h3>'
        f'<ol class="bars">{items}</ol></section>'
    )


def _bar(agent: dict[str, Any]) -> str:
    """One agent call as a row: a button (opens its details), the bar (queue part and run part,
    positioned by CSS from the times in its data attributes) and its state as text."""
    aid = agent["agentId"]

    def attr(name: str, value: int | None) -> str:
        return f' data-{name}="{value}"' if value is not None else ""

    return (
        f'<li class="agent" id="agent-{_e(aid)}" data-agent-id="{_e(aid)}" data-state="{_e(agent["state"])}"'
        f"{attr('queued', agent['queuedAt'])}{attr('started', agent['startedAt'])}{attr('ended', agent['endedAt'])}>"
        '<button type="button" class="agent-open" aria-controls="details">'
        f"{_e(agent['label'] or aid)}</button>"
        '<span class="track" aria-hidden="true"><span class="bar"><span class="queue"></span>'
        '<span class="work"></span></span></span>'
        f'<span class="state">{_e(agent["state"])}</span></li>'
    )


def _tokens_table(caption: str, rows: list[dict[str, Any]], ident: str, currency: str) -> str:
    body = "".join(
        f'<tr><th scope="row">{_e(r["name"])}</th><td>{r["agents"]}</td><td>{r["input"]}</td>'
        f"<td>{r['output']}</td><td>{_e(money(r.get('cost'), currency))}</td></tr>"
        for r in rows
    )
    return (
        f'<table class="tokens" id="{ident}"><caption>{_e(caption)}</caption><thead><tr>'
        '<th scope="col">Name</th><th scope="col">Agents</th><th scope="col">Input tokens</th>'
        '<th scope="col">Output tokens</th><th scope="col">Cost</th></tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def resume_command(run_id: str) -> str:
    """The command that resumes a stopped run (what the paused banner shows)."""
    return f"workflow-mcp resume {run_id}"


def _banner(view: dict[str, Any]) -> str:
    if view["status"] != "paused":
        return ""
    reason = view.get("pausedReason") or "paused"
    resets = f" The limit resets at {_e(view['resetsAt'])}." if view.get("resetsAt") else ""
    return (
        f"<p><strong>Paused:</strong> {_e(reason)}.{resets} Resume it with "
        f"<code>{_e(resume_command(view['runId']))}</code> or the Resume button.</p>"
    )


def run_page(view: dict[str, Any], *, base: str, stream: bool) -> str:
    """A run page for ``view`` (:func:`~workflow_mcp.server.viewer._view.run_view`). With ``stream``,
    the page follows the run live from ``view['lastSequence']`` (the script opens the event stream)."""
    agents = {a["agentId"]: a for a in view["agents"]}
    lanes = "".join(_lane(lane, agents, i) for i, lane in enumerate(view["lanes"]))
    usage = view["tokenUsage"]
    error = view.get("error")
    error_html = (
        f'<p class="error" id="run-error"><strong>Error:</strong> {_e(error["message"])}</p>' if error else ""
    )
    result = (
        f'<details id="result" open><summary>Result (JSON{", cut" if view["resultTruncated"] else ""})</summary>'
        f'<div class="json" data-json="{_e(view["result"])}"><pre>{_e(view["result"])}</pre></div></details>'
        if view["result"] is not None
        else '<details id="result"><summary>Result</summary><p>No result yet.</p></details>'
    )
    logs = "".join(f"<li>{_e(line)}</li>" for line in view["logs"])
    dropped = f"<p>{view['logsDropped']} earlier lines not shown.</p>" if view["logsDropped"] else ""
    boot = json.dumps(
        {
            "runId": view["runId"],
            "after": view["lastSequence"],
            "startedAt": view["startedAt"],
            "endedAt": view["endedAt"],
            "terminal": view["terminal"],
            "stream": stream,
            "base": base,
            "currency": view.get("currency", ""),
        }
    )
    body = (
        f'<div id="run" data-boot="{_e(boot)}">'
        f"<h1>{_e(view['workflow'] or 'Run')} {status_badge(view['status'], element_id='run-status')}</h1>"
        f'<p class="run-id">Run <code>{_e(view["runId"])}</code> · provider {_e(view["provider"] or "—")}</p>'
        f'<div id="banner" role="status" aria-live="polite">{_banner(view)}</div>'
        f'<p id="live" role="status" aria-live="polite">{"Live" if stream and not view["terminal"] else ""}</p>'
        '<section aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2><dl class="summary">'
        f'<dt>Started</dt><dd id="started">{_e(_when(view["startedAt"]))}</dd>'
        f'<dt>Duration</dt><dd id="duration">{_e(_duration(view["startedAt"], view["endedAt"]))}</dd>'
        f'<dt>Agents done</dt><dd id="agents-done">{view["done"]}/{view["total"]}</dd>'
        f'<dt>Running</dt><dd id="agents-running">{view["counts"]["running"]}</dd>'
        f'<dt>Queued</dt><dd id="agents-queued">{view["counts"]["queued"]}</dd>'
        f'<dt>Failed</dt><dd id="agents-failed">{view["counts"]["failed"]}</dd>'
        f'<dt>Tokens</dt><dd id="tokens">{usage.get("input", 0)} in / {usage.get("output", 0)} out'
        f" (+{usage.get('replayedOutput', 0)} replayed)</dd>"
        f'<dt>Cost</dt><dd id="cost">{_e(money(view.get("cost"), view.get("currency", "")))}</dd></dl>'
        f"{_prices_notice(view.get('pricesProblem'))}"
        '<div class="actions">'
        f'<button type="button" id="cancel"{"" if not view["terminal"] else " hidden"}>Cancel run</button>'
        f'<button type="button" id="resume"{"" if view["resumable"] else " hidden"}>Resume run</button>'
        '<dialog id="confirm-cancel" aria-labelledby="confirm-h"><h2 id="confirm-h">Cancel this run?</h2>'
        "<p>Running agents are stopped; finished ones stay recorded and a resume replays them.</p>"
        '<form method="dialog"><button value="no" autofocus>Keep running</button> '
        '<button value="yes" id="confirm-yes">Cancel the run</button></form></dialog>'
        '<p id="action-status" role="status" aria-live="polite"></p></div>'
        f"{error_html}</section>"
        '<section aria-labelledby="timeline-h"><h2 id="timeline-h">Timeline</h2>'
        '<p class="legend">Each bar: the light part is time queued, the solid part time running. '
        "States: queued, running, completed, failed, cancelled, cached (replayed).</p>"
        f'<div id="lanes">{lanes}</div></section>'
        '<section aria-labelledby="details-h"><h2 id="details-h">Agent details</h2>'
        '<div id="details" aria-live="polite"><p>Choose an agent above.</p></div></section>'
        '<section aria-labelledby="tokens-h"><h2 id="tokens-h">Tokens</h2>'
        f"{_tokens_table('By phase', view['tokensByPhase'], 'tokens-phase', view.get('currency', ''))}"
        f"{_tokens_table('By provider', view['tokensByProvider'], 'tokens-provider', view.get('currency', ''))}"
        "</section>"
        f'<section aria-labelledby="logs-h"><h2 id="logs-h">Log</h2>{dropped}'
        f'<ol id="logs" class="logs">{logs}</ol></section>'
        f'<section aria-labelledby="result-h"><h2 id="result-h">Final result</h2>{result}</section></div>'
    )
    return _doc(f"{view['workflow'] or 'Run'} {view['runId']}", body, base=base)


def login_page(*, base: str, error: str | None = None, next_path: str = "") -> str:
    """The sign-in form: the bearer token (also taken from the URL's ``#token=`` fragment by the script,
    which never reaches the server's logs) becomes an HttpOnly, SameSite=Strict cookie."""
    problem = f'<p class="error" role="alert">{_e(error)}</p>' if error else ""
    body = (
        f"<h1>Sign in</h1>{problem}"
        f'<form id="login" method="post" action="{base}/login">'
        f'<input type="hidden" name="next" value="{_e(next_path)}">'
        '<label for="token">Bearer token</label> '
        '<input id="token" name="token" type="password" autocomplete="current-password" required> '
        '<button type="submit">Sign in</button></form>'
        "<p>The token is the one the server prints or keeps in its token file.</p>"
    )
    return _doc("Sign in", body, base=base)
