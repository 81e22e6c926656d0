"""Which ``Host`` and ``Origin`` headers the HTTP server answers (DNS-rebinding protection).

A web page can make a browser send requests to a name the page's author controls that resolves to
this machine (DNS rebinding); the browser then sends ``Host: <that name>``. Answering only the names
this server is known by defeats that. :class:`HostRules` holds them:

* always the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``) with the bound port;
* the bound address with the port, when it is a specific address or name (``--host 10.0.0.5``,
  ``--host mcp.example``);
* for a wildcard bind (``0.0.0.0``, ``::``), also the address the connection arrived on (a literal
  address cannot be rebound: a page that names it is already on that origin) and this machine's host
  name (``hostname``, ``hostname -f``), each with the port;
* every ``--allowed-host`` entry: ``NAME`` (answered with the bound port, or without a port, as a
  reverse proxy on the default port sends it) or ``NAME:PORT`` (exactly);
* ``--allowed-host '*'``: any ``Host``. That turns the DNS-rebinding guard off, which is safe only
  because every request must also carry a bearer token (a rebound page has none); it is refused for a
  loopback bind, where the guard stays on (loopback servers are what rebinding attacks aim at).

``Origin``, when present, must be ``http://`` or ``https://`` followed by an answered ``Host`` (with
``*``: the request's own ``Host``, i.e. same-origin).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidInputError

__all__ = ["LOOPBACK_NAMES", "WILDCARD_BINDS", "HostRules"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "[::]", "")
_LOOPBACK_BINDS = ("127.0.0.1", "localhost", "::1", "[::1]")
_NAME = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(?::(\d{1,5}))?$")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _machine_names() -> list[str]:
    names: list[str] = []
    for name in (socket.gethostname(), socket.getfqdn()):
        name = name.lower().rstrip(".")
        if name and name != "localhost" and _NAME.match(name) and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class HostRules:
    """The ``Host`` values one server answers (module docstring). Build it with :meth:`of`."""

    port: int
    exact: frozenset[str]
    """``name:port`` (lower case) answered whatever the connection."""
    portless: frozenset[str]
    """Names (lower case) answered without a port too (``--allowed-host NAME``)."""
    wildcard_bind: bool
    any_host: bool

    @classmethod
    def of(cls, host: str, port: int, allowed: Iterable[str] = ()) -> HostRules:
        """The rules of a server bound to ``host``:``port`` with the ``--allowed-host`` entries ``allowed``.

        Raises:
            InvalidInputError: a malformed entry (not ``NAME``, ``NAME:PORT``, ``[IPV6]`` or ``*``), or
                ``*`` with a loopback bind.
        """
        exact = {f"{n}:{port}" for n in LOOPBACK_NAMES}
        portless: set[str] = set()
        wildcard = host in WILDCARD_BINDS
        if not wildcard:
            exact.add(f"{_bracketed(host).lower()}:{port}")
        else:
            exact.update(f"{n}:{port}" for n in _machine_names())
        any_host = False
        for entry in allowed:
            entry = entry.strip()
            if entry == "*":
                if host in _LOOPBACK_BINDS:
                    raise InvalidInputError(
                        f"--allowed-host '*' turns the DNS-rebinding guard off, which a loopback server "
                        f"(--host {host}) always keeps; name the hosts instead (--allowed-host NAME)"
                    )
                any_host = True
                continue
            match = _NAME.match(entry)
            if match is None or (match.group(2) is not None and not 0 < int(match.group(2)) < 65536):
                raise InvalidInputError(
                    f"--allowed-host {entry!r} is not a host: give NAME, NAME:PORT, [IPV6]:PORT or '*' "
                    "(no scheme, no path)"
                )
            name = match.group(1).lower()
            if match.group(2) is not None:
                exact.add(f"{name}:{int(match.group(2))}")
            else:
                exact.add(f"{name}:{port}")
                portless.add(name)
        return cls(
            port=port,
            exact=frozenset(exact),
            portless=frozenset(portless),
            wildcard_bind=wildcard,
            any_host=any_host,
        )

    def answers(self, host: str | None, local_address: str | None = None) -> bool:
        """Whether a request with ``Host: host`` that arrived on ``local_address`` is answered."""
        if host is None:
            return False
        host = host.lower()
        if self.any_host or host in self.exact or host in self.portless:
            return True
        if self.wildcard_bind and local_address:
            try:
                address = ipaddress.ip_address(local_address.split("%", 1)[0])
            except ValueError:
                return False
            mapped = getattr(address, "ipv4_mapped", None)  # an IPv4 client of a dual-stack '::' bind
            shown = {_bracketed(str(a)) for a in (address, mapped) if a is not None}
            return host in {f"{a}:{self.port}" for a in shown}
        return False

    def origin_allowed(self, origin: str, host: str | None, local_address: str | None = None) -> bool:
        """Whether ``Origin: origin`` may call a request whose ``Host`` is ``host``."""
        scheme, sep, rest = origin.lower().partition("://")
        if not sep or scheme not in ("http", "https") or "/" in rest:
            return False
        if self.any_host:
            return host is not None and rest == host.lower()
        return self.answers(rest, local_address)

    def example(self) -> str:
        """A ``Host`` this server answers, for error messages."""
        return f"127.0.0.1:{self.port}"

    def describe(self) -> str:
        """One line for the start-up banner: what ``Host`` values are answered."""
        if self.any_host:
            return "any Host (--allowed-host '*'; bearer tokens still required)"
        shown = sorted(self.exact | self.portless)
        extra = " and the address each connection arrived on" if self.wildcard_bind else ""
        return f"Host {', '.join(shown)}{extra}"
