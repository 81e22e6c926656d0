"""The prompt preview an ``agent.queued`` event stores: the start of the prompt, bounded, with each
credential shape of ``SECRET_SHAPES`` masked — also a secret the preview's end would cut."""

from __future__ import annotations

import pytest

from workflow_mcp._redact import PROMPT_PREVIEW_CHARS, SECRET_SHAPES, prompt_preview, redact

SHAPES = [
    (
        "private key block",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nend",
    ),
    ("OpenAI / Anthropic API key", "use sk-ant-api03-AbCdEfGhIjKlMnOpQrSt to call"),
    ("GitHub token", "clone with ghp_0123456789abcdefghijABCDEFGHIJ now"),
    ("GitHub token", "or github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("AWS access key id", "aws AKIAIOSFODNN7EXAMPLE here"),
    ("Slack token", "post with xoxb-1234567890-abcdefghij"),
    ("Google API key", "maps AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    ("JSON Web Token", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"),
    ("bearer credential", "header Authorization: Bearer abc.DEF-123_456~xyz"),
    ("secret-named value", 'config password="hunter2hunter2" and api_key: k3y-value; token=t0ps3cret'),
]


@pytest.mark.parametrize(("shape", "text"), SHAPES)
def test_each_credential_shape_is_masked_and_the_text_around_it_kept(shape: str, text: str) -> None:
    assert shape in {name for name, _ in SECRET_SHAPES}
    shown = redact(text)
    assert "[redacted]" in shown
    for secret in ("AbCdEfGh", "0123456789abcdefghij", "AKIAIOSFODNN7", "1234567890-abc", "SyA12345",
                   "eyJzdWIi", "abc.DEF", "hunter2", "k3y-value", "t0ps3cret", "MIIEow"):  # fmt: skip
        assert secret not in shown, (secret, shown)
    assert shown.split()[0] == text.split()[0]  # the words before it stay


def test_ordinary_prose_is_shown_as_written() -> None:
    text = "Review the token bucket in src/rate.py: is skipping the refill a bug? Say yes or no."
    assert prompt_preview(text) == text


def test_a_long_prompt_is_cut_to_the_preview_length_and_says_so() -> None:
    preview = prompt_preview("x" * 5000)
    assert len(preview) == PROMPT_PREVIEW_CHARS and preview.endswith("…")
    assert prompt_preview("y" * PROMPT_PREVIEW_CHARS) == "y" * PROMPT_PREVIEW_CHARS


def test_a_secret_the_preview_end_cuts_is_masked_whole_not_shown_in_part() -> None:
    key = "sk-" + "Q" * 40
    preview = prompt_preview("p" * (PROMPT_PREVIEW_CHARS - 10) + " " + key)
    assert "QQQ" not in preview and preview.endswith("…")


def test_a_long_token_the_search_window_cuts_is_still_masked() -> None:
    jwt = "eyJ" + "h" * 40 + "." + "eyJ" + "b" * 2000 + "." + "s" * 40
    preview = prompt_preview("call it with " + jwt)
    assert preview == "call it with [redacted]…"  # more of the prompt follows, unsearched
    pem = "-----BEGIN PRIVATE KEY-----\n" + "M" * 3000 + "\n-----END PRIVATE KEY-----"
    assert "MMM" not in prompt_preview("key " + pem)
