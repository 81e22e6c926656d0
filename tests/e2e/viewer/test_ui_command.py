"""`workflow-mcp ui`: loopback by default, its own token in the printed URL's fragment, every request
without it refused, and a port already taken refused with a clear error (no traceback)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from viewer_kit import env_for, ui_server


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def status_of(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_the_printed_url_is_loopback_and_carries_a_token_nothing_else_may_use(tmp_path: Path) -> None:
    with ui_server(tmp_path / "home") as url:
        assert url.startswith("http://127.0.0.1:") and "/ui/login#token=" in url
        origin, token = url.split("/ui/")[0], url.split("#token=")[1]
        assert len(token) >= 43
        assert status_of(f"{origin}/ui/api/runs/run_x")[0] == 401
        code, headers = status_of(f"{origin}/ui/")
        assert code == 303 and headers["location"] == "/ui/login?next=/ui/"
        stale = {"Cookie": "workflow_mcp_viewer=" + "A" * 43}  # e.g. the token of an earlier `ui`
        code, headers = status_of(f"{origin}/ui/", stale)
        assert code == 303 and headers["location"] == "/ui/login?next=/ui/"
        assert status_of(f"{origin}/ui/api/runs/run_x", stale)[0] == 401
        assert status_of(f"{origin}/ui/", {"Authorization": f"Bearer {token}"})[0] == 200
        assert status_of(f"{origin}/ui/api/runs/run_x", {"Authorization": f"Bearer {token}"})[0] == 404
        assert status_of(f"{origin}/ui/", {"Host": "evil.test"})[0] == 403  # DNS rebinding


def test_a_port_already_taken_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "workflow_mcp.cli", "ui", "--port", str(port)],
            env=env_for(tmp_path / "home"), capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and done.stdout == ""


def test_a_connection_that_sends_no_whole_request_is_closed_at_the_header_deadline(tmp_path: Path) -> None:
    # The port answers anyone on the machine before a token is checked: a socket that sends nothing, or
    # trickles a head, must not be held for ever (each one is a descriptor of the viewer's process).
    with ui_server(tmp_path / "home", "--header-timeout", "1") as url:
        port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)
        trickle = socket.create_connection(("127.0.0.1", port), timeout=10)
        with idle, trickle:
            trickle.sendall(b"GET /ui/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            started = time.monotonic()
            for sock in (idle, trickle):
                assert sock.recv(1024) == b""  # closed by the server (a hold would time out: 10 s)
            assert time.monotonic() - started < 8
