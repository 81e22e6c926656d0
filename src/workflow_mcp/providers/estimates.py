"""What a cost preview (``workflow-mcp plan``) assumes about one agent call when no past run of the
workflow says better: tokens per call and prices, per model, configurable in ``[estimates]``.

Format (every key optional; prices in US dollars per million tokens)::

    [estimates]                     # any model
    input_tokens = 20000            # per call
    output_tokens = 2000
    input_usd_per_mtok = 3.0        # a price for models with none of their own (default: none)
    output_usd_per_mtok = 15.0

    [estimates.models.gpt-5.5]      # one model: the provider's name after mapping, or the workflow's
    input_usd_per_mtok = 1.25       # normalized name (haiku, sonnet, opus); unset keys fall back to
    output_usd_per_mtok = 10.0      # [estimates], then to the built-in defaults

Built in: 20,000 input and 2,000 output tokens per call, and list prices for Claude's aliases
(:data:`BUILT_IN_PRICES`; check them against your provider's current price list). A model with no
price has no cost estimate (the preview says how many calls are unpriced).

Errors: :class:`~workflow_mcp.providers.config.ProviderConfigError`-style messages naming the file and
key, raised through :func:`parse_estimates`' ``fail`` callback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

__all__ = ["BUILT_IN_PRICES", "DEFAULT_ESTIMATES", "Estimates", "ModelEstimate", "parse_estimates"]

_TOKEN_KEYS: Final = ("input_tokens", "output_tokens")
_PRICE_KEYS: Final = ("input_usd_per_mtok", "output_usd_per_mtok")


@dataclass(frozen=True)
class ModelEstimate:
    """Tokens one call uses and, when known, its prices (USD per million tokens)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None

    def over(self, base: ModelEstimate) -> ModelEstimate:
        """This estimate with every unset value taken from ``base``."""
        return ModelEstimate(
            input_tokens=self.input_tokens if self.input_tokens is not None else base.input_tokens,
            output_tokens=self.output_tokens if self.output_tokens is not None else base.output_tokens,
            input_usd_per_mtok=_first(self.input_usd_per_mtok, base.input_usd_per_mtok),
            output_usd_per_mtok=_first(self.output_usd_per_mtok, base.output_usd_per_mtok),
        )

    @property
    def priced(self) -> bool:
        return self.input_usd_per_mtok is not None and self.output_usd_per_mtok is not None

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float | None:
        """What ``input_tokens`` and ``output_tokens`` cost at these prices (``None``: unpriced)."""
        if self.input_usd_per_mtok is None or self.output_usd_per_mtok is None:
            return None
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1e6


def _first(mine: float | None, theirs: float | None) -> float | None:
    return mine if mine is not None else theirs


BUILT_IN_PRICES: Final[Mapping[str, ModelEstimate]] = {
    # Anthropic list prices for the current models behind Claude Code's aliases (USD per Mtok).
    "haiku": ModelEstimate(input_usd_per_mtok=1.0, output_usd_per_mtok=5.0),
    "sonnet": ModelEstimate(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0),
    "opus": ModelEstimate(input_usd_per_mtok=5.0, output_usd_per_mtok=25.0),
}


@dataclass(frozen=True)
class Estimates:
    """``default`` applies to every model; ``models`` refines it per model name."""

    default: ModelEstimate = ModelEstimate(input_tokens=20_000, output_tokens=2_000)
    models: Mapping[str, ModelEstimate] = field(default_factory=lambda: dict(BUILT_IN_PRICES))

    def for_model(self, *names: str | None) -> ModelEstimate:
        """The estimate of the first of ``names`` (e.g. the provider's model, then the workflow's)
        that has an entry, over :attr:`default`; :attr:`default` alone when none has."""
        for name in names:
            if name is not None and name in self.models:
                return self.models[name].over(self.default)
        return self.default


DEFAULT_ESTIMATES: Final = Estimates()


def parse_estimates(raw: Any, fail: Callable[[str, str], Exception]) -> Estimates:
    """The ``[estimates]`` table ``raw`` over :data:`DEFAULT_ESTIMATES`. ``fail(key, problem)`` builds
    the error raised for a bad value (it names the file).

    Raises:
        whatever ``fail`` returns: an unknown key, a negative or non-numeric value.
    """
    if not isinstance(raw, Mapping):
        raise fail("estimates", "must be a table")
    top = _estimate(raw, "estimates", fail, allow={"models"})
    models = dict(DEFAULT_ESTIMATES.models)
    table = raw.get("models", {})
    if not isinstance(table, Mapping):
        raise fail("estimates.models", "must be a table of model tables")
    for name, body in table.items():
        key = f"estimates.models.{name}"
        if not isinstance(body, Mapping):
            raise fail(key, "must be a table")
        mine = _estimate(body, key, fail, allow=set())
        models[str(name)] = mine.over(models[str(name)]) if str(name) in models else mine
    return Estimates(default=top.over(DEFAULT_ESTIMATES.default), models=models)


def _estimate(
    raw: Mapping[str, Any], where: str, fail: Callable[[str, str], Exception], *, allow: set[str]
) -> ModelEstimate:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in allow:
            continue
        if key not in (*_TOKEN_KEYS, *_PRICE_KEYS):
            raise fail(
                f"{where}.{key}", f"unknown key; expected one of {', '.join((*_TOKEN_KEYS, *_PRICE_KEYS))}"
            )
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or value < 0 or (key in _TOKEN_KEYS and not isinstance(value, int)):
            kind = "a non-negative whole number" if key in _TOKEN_KEYS else "a non-negative number"
            raise fail(f"{where}.{key}", f"must be {kind}, got {value!r}")
        values[key] = float(value) if key in _PRICE_KEYS else value
    return replace(ModelEstimate(), **values)
