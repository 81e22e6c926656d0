"""The run viewer behind `workflow-mcp serve --http`: the same bearer tokens, each client seeing only
its own runs; the live event stream's cursor (no gap, no repeat across reconnects); the browser
sign-in cookie and its same-origin rule; the MCP App resource. A real server process; every wait
bounded."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from mcp_kit import BOUND_S, PARK, call, data, wait_for_event
from mcp_serve_kit import ALICE, BOB, STRANGER, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

APP_URI = "ui://workflow-mcp/run-viewer.html"


def bearer(entry: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret(entry)}"}


async def sse(response: Any, count: int) -> list[dict[str, Any]]:
    """The first ``count`` messages of a Server-Sent Events response, each ``{id, event, data}``."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if "data" in current:
                out.append(current)
                if len(out) == count:
                    return out
            current = {}
            continue
        field, _, value = line.partition(":")
        current[field] = value.removeprefix(" ")
    return out


async def test_viewer_requests_need_a_known_token_and_pages_send_a_browser_to_sign_in(site: Site) -> None:
    async with http_server(site) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        base = f"http://127.0.0.1:{server.port}/ui"
        refused = await h.get(f"{base}/api/runs/run_x")
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert "www-authenticate" in refused.headers
        wrong = await h.get(f"{base}/api/runs/run_x", headers=bearer(STRANGER))
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_token"
        forged = await h.get(f"{base}/api/runs/run_x", headers={"Cookie": f"workflow_mcp_viewer={STRANGER}"})
        assert forged.status_code == 401
        page = await h.get(f"{base}/")
        assert page.status_code == 303 and page.headers["location"] == "/ui/login?next=/ui/"
        form = await h.get(f"{base}/login")
        assert form.status_code == 200 and 'type="password"' in form.text
        bad = await h.post(f"{base}/login", data={"token": STRANGER, "next": "/ui/"})
        assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers
        ok = await h.get(f"{base}/", headers=bearer(ALICE))
        assert ok.status_code == 200 and "<h1>Runs</h1>" in ok.text


async def test_a_client_sees_only_its_own_runs_in_the_viewer(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            run = data(
                await call(alice, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK})
            )
            rid = str(run["runId"])
            await wait_for_event(alice, rid, "agent.started")
            base = f"http://127.0.0.1:{server.port}/ui"
            mine = await h.get(f"{base}/api/runs/{rid}", headers=bearer(ALICE))
            assert mine.status_code == 200 and mine.json()["agents"][0]["label"] == "greet"
            assert rid in (await h.get(f"{base}/", headers=bearer(ALICE))).text
            assert rid not in (await h.get(f"{base}/", headers=bearer(BOB))).text
            for path in ("", "/events?after=0", "/agents/ag_0001"):
                theirs = await h.get(f"{base}/api/runs/{rid}{path}", headers=bearer(BOB))
                assert theirs.status_code == 404 and "visible" in theirs.json()["message"]
            assert (await h.get(f"{base}/runs/{rid}", headers=bearer(BOB))).status_code == 404
            stopped = await h.post(f"{base}/api/runs/{rid}/cancel", headers=bearer(BOB))
            assert stopped.status_code == 404
            assert data(await call(alice, "workflow_run_status", {"runId": rid}))["status"] == "running"
            await call(alice, "workflow_run_cancel", {"runId": rid})


async def test_the_event_stream_resumes_after_the_last_event_id_with_no_gap_and_no_repeat(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        httpx2.AsyncClient(timeout=httpx2.Timeout(BOUND_S, read=BOUND_S)) as h,
    ):
        with anyio.fail_after(BOUND_S * 2):
            steps = {"default": {"delayMs": 150}}
            rid = str(
                data(
                    await call(
                        alice,
                        "workflow_run",
                        {"name": "steps", "args": {"n": 6}, "provider": "fake", "fakeScript": steps},
                    )
                )["runId"]
            )
            url = f"http://127.0.0.1:{server.port}/ui/api/runs/{rid}/events"
            async with h.stream("GET", url, params={"after": 0}, headers=bearer(ALICE)) as first:
                assert first.headers["content-type"].startswith("text/event-stream")
                head = await sse(first, 4)
            assert [int(m["id"]) for m in head] == [1, 2, 3, 4]
            # A reconnect names the last id it saw; the stream goes on after it, to the run's end.
            resumed: list[dict[str, Any]] = []
            headers = {**bearer(ALICE), "Last-Event-ID": head[-1]["id"]}
            async with h.stream("GET", url, params={"after": 0}, headers=headers) as second:
                resumed = await sse(second, 10_000)
            events = [m for m in resumed if m.get("event") == "run-event"]
            assert resumed[-1]["event"] == "end"
            sequences = [int(m["id"]) for m in events]
            assert sequences == list(range(5, 5 + len(sequences)))
            assert json.loads(events[-1]["data"])["type"] == "run.completed"
            stored = data(await call(alice, "workflow_run_status", {"runId": rid}))["lastSequence"]
            assert sequences[-1] == stored
            for m in events:  # never a prompt, key or result body
                body = json.loads(m["data"])
                assert set(body["payload"]) <= {
                    "label",
                    "phase",
                    "title",
                    "status",
                    "reason",
                    "outcome",
                    "model",
                    "provider",
                    "message",
                }
            bad = await h.get(url, headers={**bearer(ALICE), "Last-Event-ID": "x"})
            assert bad.status_code == 400 and "cursor" in bad.json()["message"]


async def test_signing_in_sets_a_strict_cookie_and_actions_need_the_pages_own_origin(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            rid = str(
                data(
                    await call(
                        alice, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK}
                    )
                )["runId"]
            )
            await wait_for_event(alice, rid, "agent.started")
            base = f"http://127.0.0.1:{server.port}/ui"
            signed = await h.post(f"{base}/login", data={"token": secret(ALICE), "next": f"/ui/runs/{rid}"})
            assert signed.status_code == 303 and signed.headers["location"] == f"/ui/runs/{rid}"
            cookie = signed.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
            jar = {"Cookie": cookie.split(";")[0]}
            page = await h.get(f"{base}/runs/{rid}", headers=jar)
            assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
            assert 'id="agent-ag_0001"' in page.text and "greet" in page.text
            elsewhere = await h.post(
                f"{base}/api/runs/{rid}/cancel", headers={**jar, "Origin": "http://evil.test"}
            )
            assert elsewhere.status_code == 403
            blind = await h.post(f"{base}/api/runs/{rid}/cancel", headers=jar)
            assert blind.status_code == 403 and "run page" in blind.json()["message"]
            own = await h.post(
                f"{base}/api/runs/{rid}/cancel", headers={**jar, "Origin": f"http://127.0.0.1:{server.port}"}
            )
            assert own.status_code == 200 and own.json()["outcome"] in ("cancelling", "requested")
            final = data(await call(alice, "workflow_run_await", {"runId": rid, "waitMs": 10_000}))
            assert final["status"] == "cancelled"


async def test_the_run_app_is_listed_readable_and_named_by_the_run_tools(site: Site) -> None:
    async with http_server(site) as server, http_client(server.url, ALICE) as alice:
        with anyio.fail_after(BOUND_S):
            listed = {str(r.uri): r for r in (await alice.list_resources()).resources}
            assert listed[APP_URI].mime_type == "text/html;profile=mcp-app"
            read = (await alice.read_resource(APP_URI)).contents[0]
            assert read.mime_type == "text/html;profile=mcp-app"
            html = read.text  # type: ignore[union-attr]
            assert "ui/notifications/tool-result" in html and "workflow_run_status" in html
            assert "http://" not in html and "https://" not in html  # loads nothing from anywhere
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            for name in ("workflow_run", "workflow_run_status"):
                assert (meta := tools[name].meta) is not None and meta["ui"]["resourceUri"] == APP_URI
            run = data(
                await call(alice, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 10_000})
            )
            status = await call(alice, "workflow_run_status", {"runId": run["runId"]})
            # What the App renders is the result itself: it names the run, and the text stays whole.
            assert data(status)["runId"] == run["runId"]
            assert status.content[0].type == "text" and run["runId"] in status.content[0].text


async def test_resume_from_the_viewer_starts_a_run_of_the_same_client_under_the_servers_rules(
    site: Site,
) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        httpx2.AsyncClient(timeout=BOUND_S) as h,
    ):
        with anyio.fail_after(BOUND_S):
            rid = str(
                data(
                    await call(
                        alice, "workflow_run", {"name": "hello", "provider": "fake", "fakeScript": PARK}
                    )
                )["runId"]
            )
            await wait_for_event(alice, rid, "agent.started")
            await call(alice, "workflow_run_cancel", {"runId": rid})
            base = f"http://127.0.0.1:{server.port}/ui/api/runs"
            assert (await h.post(f"{base}/{rid}/resume", headers=bearer(BOB))).status_code == 404
            resumed = await h.post(f"{base}/{rid}/resume", headers=bearer(ALICE))
            assert resumed.status_code == 200, resumed.text
            new_id = resumed.json()["runId"]
            assert new_id != rid and resumed.json()["url"] == f"/ui/runs/{new_id}"
            assert data(await call(alice, "workflow_run_status", {"runId": new_id}))["status"] in (
                "queued",
                "running",
            )
            assert (await h.get(f"{base}/{new_id}", headers=bearer(BOB))).status_code == 404
            again = await h.post(f"{base}/{new_id}/resume", headers=bearer(ALICE))
            assert again.status_code == 409 and "running" in again.json()["message"]
            await call(alice, "workflow_run_cancel", {"runId": new_id})


async def _raw_exchange(port: int, head: bytes, body_chunks: int = 0, chunk: bytes = b"") -> bytes:
    """Send ``head`` (and then ``body_chunks`` times ``chunk``, stopping early once the server answers
    or closes) over a raw socket; the server's whole answer."""
    stream = await anyio.connect_tcp("127.0.0.1", port)
    async with stream:
        await stream.send(head)
        for _ in range(body_chunks):
            try:
                await stream.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                break  # the server answered and closed: it read no further
        answer = b""
        with anyio.fail_after(BOUND_S):
            while True:
                try:
                    part = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    break
                answer += part
                if b"</html>" in answer or b"}" in answer.partition(b"\r\n\r\n")[2]:
                    break
        return answer


async def test_the_sign_in_form_reads_only_a_small_url_encoded_body_before_any_token_is_checked(
    site: Site,
) -> None:
    # /ui/login is reachable without a token, so what it reads is what any local process can make it
    # read: a multipart upload used to be spooled to disk whole (600 MB in 5 s) and URL-encoded fields
    # held up to a megabyte each in memory.
    async with http_server(site) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        with anyio.fail_after(BOUND_S * 2):
            port = server.port
            host = f"Host: 127.0.0.1:{port}\r\n".encode()
            announced = await _raw_exchange(
                port,
                b"POST /ui/login HTTP/1.1\r\n" + host + b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: 1000000000\r\n\r\ntoken=",
            )
            assert announced.startswith(b"HTTP/1.1 413 "), announced[:200]
            assert b"4096 bytes" in announced
            chunked = await _raw_exchange(
                port,
                b"POST /ui/login HTTP/1.1\r\n" + host + b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n",
                body_chunks=2000,
                chunk=b"10000\r\n" + b"a" * 0x10000 + b"\r\n",
            )
            assert chunked.startswith(b"HTTP/1.1 413 "), chunked[:200]
            upload = await h.post(
                f"http://127.0.0.1:{port}/ui/login",
                files={"token": ("t.txt", b"a" * 10_000)},
            )
            assert upload.status_code == 415 and "application/x-www-form-urlencoded" in upload.text
            many = await h.post(
                f"http://127.0.0.1:{port}/ui/login",
                content=b"&".join([b"a=1"] * 100),
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert many.status_code == 400 and "fields" in many.text
            assert server.proc.returncode is None
            ok = await h.post(
                f"http://127.0.0.1:{port}/ui/login", data={"token": secret(ALICE), "next": "/ui/"}
            )
            assert ok.status_code == 303 and ok.headers["location"] == "/ui/"
            # After signing in the browser goes to a viewer page, never out of the viewer.
            for away in (
                "/ui/../mcp",
                "/ui/%2e%2e/mcp",
                "//evil.test/ui/",
                "/ui/\\evil.test",
                "https://evil.test/ui/",
            ):
                sent = await h.post(
                    f"http://127.0.0.1:{port}/ui/login", data={"token": secret(ALICE), "next": away}
                )
                assert sent.status_code == 303 and sent.headers["location"] == "/ui/", away


async def test_the_sign_in_cookie_is_a_viewer_session_of_this_server_never_the_bearer_token(
    site: Site,
) -> None:
    # Browsers send a host's cookies to every port of it: a cookie holding the bearer token would hand
    # the MCP credential to any other server on this machine the browser visits under /ui.
    async with http_server(site) as server, httpx2.AsyncClient(timeout=BOUND_S) as h:
        with anyio.fail_after(BOUND_S):
            base = f"http://127.0.0.1:{server.port}/ui"
            signed = await h.post(f"{base}/login", data={"token": secret(ALICE), "next": "/ui/"})
            assert signed.status_code == 303
            name, _, value = signed.headers["set-cookie"].split(";")[0].partition("=")
            assert name == f"workflow_mcp_viewer_{server.port}"  # one server's cookie, not another's
            assert secret(ALICE) not in signed.headers["set-cookie"] and len(value) >= 43
            page = await h.get(f"{base}/", headers={"Cookie": f"{name}={value}"})
            assert page.status_code == 200 and "<h1>Runs</h1>" in page.text
            # The session opens the viewer only: as a bearer token it opens nothing.
            as_bearer = await h.get(f"{base}/", headers={"Authorization": f"Bearer {value}"})
            assert as_bearer.status_code == 401
            mcp = await h.post(
                server.url,
                headers={"Authorization": f"Bearer {value}", "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            )
            assert mcp.status_code == 401
            # The token itself in the cookie is no sign-in either.
            raw = await h.get(f"{base}/api/runs/run_x", headers={"Cookie": f"{name}={secret(ALICE)}"})
            assert raw.status_code == 401
            # Every answer of the viewer is read as what it says it is, and the data stays out of caches.
            for path in ("/api/runs/run_x", "/api/runs/run_x/agents/ag_0001", "/login", "/"):
                answer = await h.get(base + path, headers={"Cookie": f"{name}={value}"})
                assert answer.headers["x-content-type-options"] == "nosniff", path
                assert answer.headers["cache-control"] == "no-store", path
            script = await h.get(f"{base}/static/viewer.js")
            assert script.status_code == 200 and script.headers["x-content-type-options"] == "nosniff"


async def test_the_routes_open_without_a_token_open_nothing_else_whatever_the_path_says(site: Site) -> None:
    # /ui/login and /ui/static/… skip the token check; a raw path (not normalised by a client) that
    # starts with them must never reach a run's data, a control or a file of the package.
    async with http_server(site) as server, http_client(server.url, ALICE) as alice:
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(alice, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 10_000})
            )["runId"]
            tries = [
                ("GET", f"/ui/static/../api/runs/{rid}"),
                ("GET", f"/ui/static/../runs/{rid}"),
                ("GET", f"/ui/static/..%2fapi/runs/{rid}"),
                ("GET", "/ui/static/%2e%2e/_app.py"),
                ("GET", "/ui/static/../../mcp"),
                ("POST", f"/ui/static/../api/runs/{rid}/resume"),
                ("GET", f"/ui/login/../api/runs/{rid}"),
            ]
            for method, path in tries:
                head = (
                    f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n"
                ).encode()
                answer = await _raw_exchange(server.port, head)
                status = int(answer.split(b" ", 2)[1])
                assert status in (303, 404, 405), (path, answer[:200])
                assert rid.encode() not in answer.partition(b"\r\n\r\n")[2], path
                assert b"import" not in answer, path  # no source file of the package
