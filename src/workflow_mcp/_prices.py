"""What agent calls cost: token usage times a price table the user keeps, never fetched.

The table is ``$WORKFLOW_MCP_HOME/prices.toml`` (default ``~/.workflow-mcp/prices.toml``); without it
no cost is known and none is shown. Format (every key optional; prices per million tokens)::

    currency = "USD"              # the label shown beside every amount (default "USD")

    [codex."gpt-5.5"]             # a provider, then a model as the call was routed to it
    input = 1.25
    output = 10.0
    cache_read = 0.125
    cache_write = 0.0

    [claude."*"]                  # any model of that provider, and calls that name no model
    input = 3.0
    output = 15.0

A call's cost is known when its provider and model (or its provider's ``"*"``) have a price for every
kind of token it used (``input``, ``output``, ``cacheRead``, ``cacheWrite``; a kind it did not use
needs none). A replayed (``cached``) call costs nothing new. A sum — a run, a phase, a provider — is
known only when every call in it is: one unknown call makes the sum unknown, never a guess.

Errors: :class:`PriceTableError` names the file and the key (``codex."gpt-5.5".input``).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .errors import InvalidInputError
from .providers.config import MAX_CONFIG_BYTES

__all__ = [
    "ANY_MODEL",
    "PRICES_FILE_NAME",
    "TOKEN_KINDS",
    "PriceTable",
    "PriceTableError",
    "load_prices",
    "parse_prices",
    "prices_path",
]

PRICES_FILE_NAME: Final = "prices.toml"
ANY_MODEL: Final = "*"
"""The model key that prices every model of a provider (and calls that name none)."""
TOKEN_KINDS: Final[Mapping[str, str]] = {
    "input": "input",
    "output": "output",
    "cacheRead": "cache_read",
    "cacheWrite": "cache_write",
}
"""Token usage field (as events and states name it) -> the price key of the table."""
_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")
_PER: Final = 1_000_000
"""Prices are per this many tokens."""


class PriceTableError(InvalidInputError):
    """Raised when the price table cannot be read or a key in it is not a price."""

    def __init__(self, path: str, key: str | None, problem: str) -> None:
        self.path = path
        self.key = key
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class PriceTable:
    """Prices per million tokens by ``(provider, model)``; ``path`` is the file they came from
    (``None``: no file, so nothing is priced)."""

    currency: str = "USD"
    prices: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    path: str | None = None

    def cost(self, provider: str | None, model: str | None, tokens: Mapping[str, int]) -> float | None:
        """What one call with usage ``tokens`` (``{input, output, cacheRead, cacheWrite}``) cost, in
        :attr:`currency`; ``None`` when its provider and model have no price for a kind it used, and
        always without a price file (nothing is priced, so no amount is shown, not even 0)."""
        if self.path is None and not self.prices:
            return None
        if provider is None:
            return None if any(int(tokens.get(k, 0)) for k in TOKEN_KINDS) else 0.0
        price = self.prices.get((provider, model or ANY_MODEL)) or self.prices.get((provider, ANY_MODEL))
        total = 0.0
        for kind, key in TOKEN_KINDS.items():
            count = int(tokens.get(kind, 0))
            if not count:
                continue
            rate = price.get(key) if price is not None else None
            if rate is None:
                return None
            total += count * rate / _PER
        return total

    @staticmethod
    def total(costs: Iterable[float | None]) -> float | None:
        """The sum of ``costs``, or ``None`` when any of them is unknown."""
        out = 0.0
        for cost in costs:
            if cost is None:
                return None
            out += cost
        return out


def prices_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$WORKFLOW_MCP_HOME/prices.toml``, default ``~/.workflow-mcp/prices.toml``."""
    env = os.environ if environ is None else environ
    home = env.get("WORKFLOW_MCP_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".workflow-mcp"
    )
    return Path(home) / PRICES_FILE_NAME


def load_prices(path: Path) -> PriceTable:
    """The table in ``path``; an empty one (nothing priced) when there is no such file.

    Raises:
        PriceTableError: the file cannot be read, is over
            :data:`~workflow_mcp.providers.config.MAX_CONFIG_BYTES` (1 MiB, as every configuration
            file), is not TOML or is nested too deeply to read, or a key is not a price.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return PriceTable()
    except OSError as exc:
        raise PriceTableError(str(path), None, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise PriceTableError(
            str(path), None, f"is over {MAX_CONFIG_BYTES:,} bytes (workflow-mcp limit for configuration)"
        )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceTableError(str(path), None, f"is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise PriceTableError(
            str(path), None, "nests arrays or tables too deeply to read; flatten it"
        ) from None
    return parse_prices(data, str(path))


def _quoted(name: str) -> str:
    """``name`` as a TOML key: bare when it may be (``A-Za-z0-9_-``), else quoted."""
    return name if _BARE.fullmatch(name) else f'"{name}"'


def parse_prices(data: Mapping[str, Any], source: str) -> PriceTable:
    """Validate one parsed TOML document (see the module docstring for its keys).

    Raises:
        PriceTableError: a key is not a provider table of model tables of non-negative prices.
    """
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip() or len(currency) > 16:
        raise PriceTableError(source, "currency", f"must be a short label such as 'USD', got {currency!r}")
    prices: dict[tuple[str, str], dict[str, float]] = {}
    for provider, models in data.items():
        if provider == "currency":
            continue
        if not isinstance(models, Mapping):
            raise PriceTableError(
                source,
                _quoted(provider),
                'must be a table of models, e.g. [codex."gpt-5.5"] with input = 1.25',
            )
        for model, table in models.items():
            key = f"{_quoted(provider)}.{_quoted(model)}"
            if not isinstance(table, Mapping):
                raise PriceTableError(source, key, "must be a table of prices per million tokens")
            entry: dict[str, float] = {}
            for name, value in table.items():
                if name not in TOKEN_KINDS.values():
                    raise PriceTableError(
                        source,
                        f"{key}.{name}",
                        f"unknown key; expected one of {', '.join(TOKEN_KINDS.values())}",
                    )
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or value < 0
                    or not math.isfinite(value)
                ):
                    raise PriceTableError(
                        source,
                        f"{key}.{name}",
                        f"must be a non-negative number (per million tokens), got {value!r}",
                    )
                entry[name] = float(value)
            prices[(provider, model)] = entry
    return PriceTable(currency=currency.strip(), prices=prices, path=source)
