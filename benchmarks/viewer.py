"""Run viewer benchmark: a 1,000-agent run page in headless Chromium, while the run goes on.

    python benchmarks/viewer.py [--ticks N] [--tick-ms MS]

A real ``workflow-mcp run`` process runs a workflow of 1,000 agent calls on the fake provider: 1,000 - N
at once (instant), then N one after another, each taking ``--tick-ms``. A real ``workflow-mcp ui``
process serves the viewer; Debian's Chromium (Playwright) opens the run page once the first 1,000 - N
calls are done. Figures:

- time to first render of the page (navigation start to first contentful paint; also the HTML response
  and DOMContentLoaded), with 1,000 - N agent bars on it
- update latency: for each of the N later calls, from its ``agent.started`` event's timestamp (taken when
  the event is persisted) to the moment its bar leaves ``queued`` in the page (``running``, or already done when both events came
  in one batch) — median and worst
- responsiveness while updating: from a click on an agent to its details shown (median and worst)

Targets (the viewer's acceptance): first render ≤ 1 s, an event visible ≤ 250 ms after it is persisted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e" / "viewer"))

from viewer_kit import env_for, read_line, ui_server


def epoch_ms(stamp: str) -> int:
    return int(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def workflow(ticks: int) -> str:
    return (
        "export const meta = { name: 'thousand-live', description: '1,000 agents, the last ones one by one', "
        "phases: [{ title: 'Fan out' }, { title: 'Ticks' }] }\n"
        "phase('Fan out')\n"
        f"await parallel(Array.from({{ length: {1000 - ticks} }}, (_, i) => () => agent('n' + i, "
        "{ label: 'fan:' + i })))\n"
        "phase('Ticks')\n"
        f"for (let i = 0; i < {ticks}; i++) await agent('tick ' + i, {{ label: 'tick:' + i }})\n"
        "return 'done'\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--tick-ms", type=int, default=400)
    parser.add_argument("--debug", action="store_true")
    opts = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        wf = root / "thousand.js"
        wf.write_text(workflow(opts.ticks))
        fake = root / "fake.json"
        fake.write_text(
            json.dumps(
                {
                    "rules": [
                        {"match": {"label": "tick:*"}, "respond": {"text": "t", "delayMs": opts.tick_ms}},
                        {
                            "match": {"label": "fan:*"},
                            "respond": {"text": "f", "tokens": {"input": 3, "output": 1}},
                        },
                    ]
                }
            )
        )
        import subprocess

        with ui_server(home) as url:
            run = subprocess.Popen(
                [sys.executable, "-m", "workflow_mcp.cli", "run", str(wf), "--provider", "fake", "--fake-script",
                 str(fake), "--concurrency", "64", "--events", "none"],
                env=env_for(home), cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            run_id = read_line(run, "stderr", r"run (run_\w+) started").group(1)
            origin = url.split("/ui/")[0]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url)
                page.wait_for_url("**/ui/")
                # Open the page once the fan-out is done and the ticks have begun.
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    view = page.request.get(f"{origin}/ui/api/runs/{run_id}").json()
                    if view["counts"]["completed"] >= 1000 - opts.ticks:
                        break
                    time.sleep(0.2)
                page.goto(f"{origin}/ui/runs/{run_id}")
                timing = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " const fcp = performance.getEntriesByName('first-contentful-paint')[0];"
                    " return { response: n.responseEnd, dom: n.domContentLoadedEventEnd,"
                    " fcp: fcp ? fcp.startTime : null, bars: document.querySelectorAll('li.agent').length }; }"
                )
                # Record when each tick's bar leaves queued (running, or done within the same batch), in the
                # page's own clock (epoch ms).
                page.evaluate(
                    "() => { window.seen = {}; new MutationObserver((ms) => { const now = Date.now();"
                    " for (const m of ms) { const li = m.target; if (li.dataset && li.dataset.state !== 'queued'"
                    " && !(li.dataset.agentId in window.seen)) window.seen[li.dataset.agentId] = now; }"
                    " }).observe(document.getElementById('lanes'), { attributes: true, subtree: true,"
                    " attributeFilter: ['data-state'] }); }"
                )
                clicks = []
                for i in range(min(5, 1000 - opts.ticks)):
                    started = time.perf_counter()
                    page.locator("li.agent button").nth(i * 97).click()
                    page.locator("#details dd").get_by_text(f"fan:{i * 97}", exact=True).wait_for(
                        timeout=10_000
                    )
                    clicks.append((time.perf_counter() - started) * 1000)
                page.locator("#run-status").get_by_text("completed").wait_for(
                    timeout=opts.ticks * opts.tick_ms + 60_000
                )
                seen = page.evaluate("() => window.seen")
                browser.close()
            run.wait(60)
            out = subprocess.run(
                [sys.executable, "-m", "workflow_mcp.cli", "runs", "events", run_id, "--json"],
                env=env_for(home), capture_output=True, text=True, check=True,
            )  # fmt: skip
        started_at = {}
        for line in out.stdout.splitlines():
            event = json.loads(line)
            if event["type"] == "agent.started" and event["payload"].get("label", "").startswith("tick:"):
                started_at[event["agentId"]] = epoch_ms(event["timestamp"])
        lags = [seen[a] - at for a, at in started_at.items() if a in seen]
    if opts.debug:
        print("every latency (ms):", sorted(lags))
    print(f"run page with {timing['bars']} agent bars (1,000-agent run, {opts.ticks} still to come)")
    print(
        f"first render: {timing['fcp']:.0f} ms to first contentful paint "
        f"(HTML received at {timing['response']:.0f} ms, DOMContentLoaded at {timing['dom']:.0f} ms); target ≤ 1000 ms"
    )
    if lags:
        print(
            f"update latency over {len(lags)} events (persisted → bar leaves queued): median "
            f"{statistics.median(lags):.0f} ms, worst {max(lags):.0f} ms; target ≤ 250 ms"
        )
    else:
        print("update latency: no tick was seen leaving queued (the page missed them)")
    print(
        f"agent details after a click while live: median {statistics.median(clicks):.0f} ms, worst {max(clicks):.0f} ms"
    )


if __name__ == "__main__":
    main()
