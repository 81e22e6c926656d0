"""The run viewer in headless Chromium (Debian's, driven by Playwright): a real `workflow-mcp ui`
process and a real `workflow-mcp run` on the fake provider with delays, as a user would start them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from viewer_kit import CHROMIUM, fake_script, started_run, ui_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

playwright_sync = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")

WAIT_MS = 20_000


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: `test-artifacts/viewer` (git-ignored) when it can be written, else tmp."""
    out = Path(__file__).resolve().parents[3] / "test-artifacts" / "viewer"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError:
        out = tmp_path
    return out


@pytest.fixture
def browser() -> Iterator[Browser]:
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def _attribute(element: Locator, name: str) -> str:
    """The ``name`` attribute of ``element``, which must carry it."""
    value = element.get_attribute(name)
    assert value is not None, f"no {name} attribute"
    return value


def _state(page: Page, label: str) -> str | None:
    return page.locator(f"li.agent:has(button:text-is('{label}'))").get_attribute("data-state")


def test_bars_go_from_running_to_done_a_failed_agent_is_marked_failed_and_a_reload_leaves_no_gap(
    tmp_path: Path, browser: Browser, artifacts: Path
) -> None:
    home = tmp_path / "home"
    script = fake_script(
        tmp_path / "fake.json", slow_ms=4000, build_ms=5000
    )  # slower than a page load under load
    home.mkdir()
    # 35 input and 17 output tokens in all (viewer_kit.fake_script): 0.035 + 0.034
    (home / "prices.toml").write_text('[fake."*"]\ninput = 1000\noutput = 2000\n')
    with ui_server(home) as url, started_run(home, tmp_path, script) as (run_id, proc):
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url)
        page.wait_for_url("**/ui/")
        page.goto(url.split("/ui/")[0] + f"/ui/runs/{run_id}")
        build1 = page.locator("li.agent:has(button:text-is('build:1'))")
        build1.wait_for(timeout=WAIT_MS)
        playwright_sync.expect(build1).to_have_attribute("data-state", "running", timeout=WAIT_MS)
        assert build1.locator(".state").inner_text() == "running"  # the state is text, not colour alone
        # The moving "now" of the time axis is set on the rows of unfinished calls alone.
        playwright_sync.expect(build1).to_have_attribute("style", re.compile("--now"), timeout=WAIT_MS)
        page.screenshot(path=str(artifacts / "running.png"), full_page=True)
        playwright_sync.expect(build1).to_have_attribute("data-state", "completed", timeout=WAIT_MS)
        playwright_sync.expect(build1).not_to_have_attribute("style", re.compile("--now"), timeout=WAIT_MS)
        failed = page.locator("li.agent:has(button:text-is('build:2'))")
        playwright_sync.expect(failed).to_have_attribute("data-state", "failed", timeout=WAIT_MS)
        assert failed.locator(".state").inner_text() == "failed"

        # Reload while the run is still going: the new page starts where its server render ends.
        playwright_sync.expect(page.locator("li.agent:has(button:text-is('last'))")).to_have_attribute(
            "data-state", "running", timeout=WAIT_MS
        )
        page.reload()
        root = page.locator("#run")
        after = int(_attribute(root, "data-boot").split('"after": ')[1].split(",")[0])
        playwright_sync.expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS)
        assert proc.wait(30) == 0
        playwright_sync.expect(page.locator("#result .json details").first).to_be_visible(timeout=WAIT_MS)
        assert root.get_attribute("data-gaps") == "0" and root.get_attribute("data-duplicates") == "0"
        assert (
            int(_attribute(root, "data-applied")) == int(_attribute(root, "data-last-sequence")) - after > 0
        )
        for label, state in [
            ("build:1", "completed"),
            ("build:2", "failed"),
            ("build:3", "completed"),
            ("check:1", "completed"),
            ("check:2", "completed"),
            ("last", "completed"),
        ]:
            assert _state(page, label) == state
        assert page.locator("li.agent[style*='--now']").count() == 0
        playwright_sync.expect(page.locator("#cost")).to_have_text("0.0690 USD", timeout=WAIT_MS)
        assert "Build\t3\t20\t10\t0.0400 USD" in page.locator("#tokens-phase").inner_text()
        page.locator("li.agent button:text-is('build:2')").focus()
        page.keyboard.press("Enter")  # keyboard-usable
        playwright_sync.expect(page.locator("#details")).to_contain_text("compiler crashed", timeout=WAIT_MS)
        details = page.locator("#details dl").inner_text()
        assert "Prompt preview\nbuild part 2" in details and "Provider\nfake" in details
        assert "built 2 of 3" in page.locator("#logs").inner_text()
        page.screenshot(path=str(artifacts / "completed.png"), full_page=True)
        page.locator("header a").click()  # the runs page
        row = page.locator(f"tr:has(a:text-is('{run_id}'))")
        assert row.locator(".status").inner_text() == "completed"
        assert "watch-me" in row.inner_text() and "fake" in row.inner_text() and "6/6" in row.inner_text()
        assert row.locator("td").last.inner_text() == "0.0690 USD"
        page.screenshot(path=str(artifacts / "runs.png"), full_page=True)


def test_cancel_asks_for_confirmation_and_the_run_ends_cancelled(
    tmp_path: Path, browser: object, artifacts: Path
) -> None:
    home = tmp_path / "home"
    script = fake_script(tmp_path / "fake.json", slow_ms=120_000, build_ms=200)
    with ui_server(home) as url, started_run(home, tmp_path, script) as (run_id, proc):
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(url)
        page.wait_for_url("**/ui/")
        page.goto(url.split("/ui/")[0] + f"/ui/runs/{run_id}")
        last = page.locator("li.agent:has(button:text-is('last'))")
        playwright_sync.expect(last).to_have_attribute("data-state", "running", timeout=WAIT_MS)
        page.locator("#cancel").click()
        playwright_sync.expect(page.locator("#confirm-cancel")).to_be_visible()
        page.screenshot(path=str(artifacts / "confirm-cancel.png"))
        page.locator("#confirm-cancel button[value=no]").click()  # declining leaves it running
        assert _state(page, "last") == "running"
        page.locator("#cancel").click()
        page.locator("#confirm-yes").click()
        playwright_sync.expect(page.locator("#run-status")).to_have_text("cancelled", timeout=WAIT_MS)
        playwright_sync.expect(last).to_have_attribute("data-state", "cancelled", timeout=WAIT_MS)
        playwright_sync.expect(page.locator("#resume")).to_be_visible(timeout=WAIT_MS)
        assert proc.wait(30) != 0
        page.screenshot(path=str(artifacts / "cancelled.png"), full_page=True)
        # Resume continues it as a new run (here, in the viewer's process), replaying the finished calls.
        page.locator("#resume").click()
        link = page.locator("#action-status a")
        playwright_sync.expect(link).to_have_text(re.compile(r"^run_\w+$"), timeout=WAIT_MS)
        link.click()
        playwright_sync.expect(page.locator("#run-status")).to_have_text("running", timeout=WAIT_MS)
        assert _state(page, "build:1") == "cached"  # replayed from the cancelled run's journal
        playwright_sync.expect(page.locator("li.agent:has(button:text-is('last'))")).to_have_attribute(
            "data-state", "running", timeout=WAIT_MS
        )
        page.screenshot(path=str(artifacts / "resumed.png"), full_page=True)
