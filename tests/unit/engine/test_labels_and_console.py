"""Labels and console lines as Claude Code 2.1.332 shows them (measured with the oracle)."""

from __future__ import annotations

from workflow_mcp import FakeProvider

from helpers import logs, run_source

LABELS = (
    "return [await agent('absent label'), await agent('empty', { label: '' }),"
    " await agent('numeric', { label: 42 }), await agent('null label', { label: null })]"
)


def test_an_explicit_label_is_kept_as_given_and_only_an_absent_one_falls_back_to_the_prompt() -> None:
    out = run_source(LABELS, provider=FakeProvider({"default": {"text": "<{label}>"}}))
    assert out.result == ["<absent label>", "<>", "<42>", "<null label>"]


def test_console_methods_write_log_lines_with_json_values_and_warn_and_error_tags() -> None:
    out = run_source(
        "console.log({ a: 1 }, [1, 2], 'x', null, undefined)\nconsole.warn('w')\nconsole.error('e')\n"
        "console.info('i')\nconsole.debug('d')\nreturn typeof console.table"
    )
    assert out.result == "undefined"
    assert logs(out.events) == ['{"a":1} [1,2] x null ', "[warn] w", "[error] e", "i", "d"]
