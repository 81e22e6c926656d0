"""The user's price table (prices.toml): per provider and model, per million tokens; a call is priced
only for the kinds of token it used; a bad table names its file and key; the service reads it again
when it changes and never fetches one."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp import MemoryStore, WorkflowService
from workflow_mcp._prices import PriceTable, PriceTableError, load_prices, parse_prices, prices_path


def test_a_call_costs_its_tokens_at_its_provider_and_models_price_per_million() -> None:
    table = parse_prices({"codex": {"gpt-5": {"input": 1.25, "output": 10, "cache_read": 0.125}}}, "p.toml")
    assert table.currency == "USD"
    tokens = {"input": 2_000_000, "output": 500_000, "cacheRead": 4_000_000, "cacheWrite": 0}
    assert table.cost("codex", "gpt-5", tokens) == pytest.approx(2.5 + 5 + 0.5)
    assert table.cost("codex", "gpt-5", {"cacheWrite": 1}) is None  # a kind used without a price
    assert (
        table.cost("codex", "other", {"input": 1}) is None
        and table.cost("claude", "gpt-5", {"input": 1}) is None
    )
    assert table.cost("codex", "gpt-5", {}) == 0.0  # used nothing: costs nothing
    assert table.cost(None, None, {"input": 1}) is None
    assert PriceTable.total([1.0, 2.0]) == 3.0 and PriceTable.total([1.0, None]) is None


def test_a_providers_star_prices_every_model_and_calls_that_name_none() -> None:
    table = parse_prices({"claude": {"*": {"output": 15}, "haiku": {"output": 1}}}, "p.toml")
    assert table.cost("claude", "haiku", {"output": 1_000_000}) == 1.0
    assert table.cost("claude", "opus", {"output": 1_000_000}) == 15.0
    assert table.cost("claude", None, {"output": 1_000_000}) == 15.0


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("currency = 5", "p.toml: currency: must be a short label"),
        ("codex = 3", "p.toml: codex: must be a table of models"),
        ('[codex]\n"gpt-5.5" = 1', 'p.toml: codex."gpt-5.5": must be a table of prices'),
        ("[codex]\ngpt-5 = 1", "p.toml: codex.gpt-5: must be a table of prices"),
        ('[codex."gpt-5.5"]\ninput = -1', 'p.toml: codex."gpt-5.5".input: must be a non-negative number'),
        ('[codex."gpt-5.5"]\ninput = "1"', 'p.toml: codex."gpt-5.5".input: must be a non-negative number'),
        ('[codex."gpt-5.5"]\ninput = nan', 'p.toml: codex."gpt-5.5".input: must be a non-negative number'),
        (
            '[codex."gpt-5.5"]\nprompt = 1',
            'p.toml: codex."gpt-5.5".prompt: unknown key; expected one of input',
        ),
        ('[codex."gpt-5"\ninput = 1', "p.toml: is not valid TOML"),
        ("a = " + "[" * 100_000 + "]" * 100_000, "p.toml: nests arrays or tables too deeply to read"),
        ("a = " + "{b = " * 50_000 + "1" + "}" * 50_000, "p.toml: nests arrays or tables too deeply to read"),
        (
            "# " + "x" * (1024 * 1024),
            "p.toml: is over 1,048,576 bytes (workflow-mcp limit for configuration)",
        ),
    ],
)
def test_a_bad_price_table_names_its_file_and_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PriceTableError) as caught:
        load_prices(path)
    assert str(caught.value).replace(str(tmp_path) + "/", "").startswith(named), str(caught.value)


def test_the_service_reads_the_users_table_again_when_it_changes_and_none_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(tmp_path))
    assert prices_path() == tmp_path / "prices.toml"
    service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
    assert service.prices().prices == {} and service.prices().path is None
    (tmp_path / "prices.toml").write_text('currency = "EUR"\n[fake."*"]\noutput = 2\n')
    assert service.prices().currency == "EUR"
    assert service.prices().cost("fake", None, {"output": 1_000_000}) == 2.0
    (tmp_path / "prices.toml").write_text('[fake."*"]\noutput = -2\n')
    with pytest.raises(PriceTableError, match="output: must be a non-negative number"):
        service.prices()
    (tmp_path / "prices.toml").unlink()
    assert service.prices().prices == {}


def test_without_a_price_file_no_call_has_a_cost_not_even_one_that_used_no_tokens() -> None:
    table = load_prices(Path("/nonexistent/prices.toml"))
    assert table.cost("fake", None, {}) is None
    assert table.cost(None, None, {"input": 0}) is None
    assert PriceTable.total([table.cost("fake", None, {})]) is None
