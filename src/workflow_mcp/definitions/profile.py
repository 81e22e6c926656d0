"""Compatibility profiles: the measured limits and rules of one Claude Code release, as data.

Every limit the runtime enforces is read from a :class:`Profile`, so a rule always cites the profile it
comes from. ``claude-code/2.1.332`` is the default; ``claude-code/2.1.209`` is the release the original
specification describes. Differences between the two are data here, never ``if`` statements elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._nesting import MAX_VALUE_DEPTH  # the one nesting rule, documented there

__all__ = ["DEFAULT_PROFILE", "MAX_VALUE_DEPTH", "PROFILES", "Profile", "default_concurrency", "get_profile"]


@dataclass(frozen=True)
class Profile:
    """One Claude Code release's workflow semantics.

    Attributes (units in the name where it matters):
        name: ``claude-code/<version>``.
        max_file_bytes: file size limit, checked on raw bytes before decoding.
        max_inline_code_units: inline source limit in UTF-16 code units.
        max_agent_calls: agent() calls admitted per run (the child workflows included).
        max_fanout_items: the longest array that crosses Claude Code's workflow VM boundary: the
            array given to parallel()/pipeline(), and every array in child workflow args and results,
            structured agent results, agent() options and the final value (measured, 2.1.332: 4,097
            entries fail with "array length 4097 exceeds the maximum of 4096 supported across the
            workflow VM boundary"; the run's own args are not bounded).
        boundary_child_depth, boundary_final_depth: the deepest nesting (objects, arrays counted) the
            boundary copy passes for child workflow args and results (and agent() options), and for
            the final value (measured, 2.1.332: 100,000 and 28,000; one more fails with "nesting
            deeper than N levels is not supported"). Values read by the host (the final value,
            agent() options) are further bounded by workflow-mcp's own 256 levels.
        max_meta_depth: nesting depth of the meta literal (arrays, objects and parentheses, the meta
            object included). Claude Code's parser recurses: measured with the oracle, 2.1.332 loads
            meta nested 6,000 deep and fails at 7,000 ("Script parse error: Maximum call stack size
            exceeded", or the file is not listed); 2.1.209 loads 3,000 and fails at 4,000. The point
            depends on the stack in use, so the limit keeps a margin below it.
        sync_timeout_ms: longest synchronous stretch of workflow JavaScript.
        log_line_max_chars, log_line_keep_chars: a log line longer than ``log_line_max_chars`` UTF-16
            code units keeps its first and last ``log_line_keep_chars`` around the marker
            ``\n\n... [N characters truncated] ...\n\n`` (N the units dropped). Measured in Claude
            Code 2.1.332: 11,024 units stay whole, 11,025 are cut to 5,000 + 5,000.
        max_log_lines, max_log_chars: log lines (and UTF-16 units of log text) one run keeps; later
            lines are dropped, with one ``warning`` event naming the limit and one at the end counting
            the dropped lines. workflow-mcp limits: Claude Code 2.1.332 keeps the first 1,000 lines
            in its run record and drops the rest silently (measured); the events here are the run's
            log, so more are kept, within a bound on storage.
        max_run_events: events one run may emit; the run then fails with a ``LimitError`` naming the
            limit (the events of stopping still follow). A workflow-mcp limit (a phase() title per
            loop turn would otherwise grow the store without bound).
        max_output_deltas: ``agent.output.delta`` events one run records. Providers stream a delta
            per few tokens (Codex, Claude, ACP), so a long fan-out makes millions; past the limit the
            deltas are dropped, with one ``warning`` naming it, and count toward nothing else. They
            are progress only: each call's whole result is still recorded when it ends. A workflow-mcp
            limit, chosen so that deltas alone never reach ``max_run_events``.
        stall_window_ms: default per-agent stall window; ``stall_retries`` retries follow a stall.
        schema_retries: re-asks after a structured output fails validation (then agent() rejects).
        cache_key_options: execution-affecting agent() options hashed into the v2 cache key.
        agent_options: every agent() option the release recognises (others are ignored).
        efforts: the accepted ``effort`` values (others are ignored).
        import_refused_at_load: a real ``import()`` expression refuses the file before launch
            (2.1.209 launched and threw at run time).
        journal_started_has_label: ``started`` journal lines carry ``label`` and ``phase``.
        budget_from_turn: ``budget.total`` came from the turn's token budget (2.1.209).
        flat_cache_chain: one cache-key chain in agent() call order; parallel()/pipeline() neither
            fork nor join it (2.1.209).
        fanout_start_deferred: a parallel()/pipeline() fan-out's slots start as a 0 ms timer made at
            the call would fire (measured in 2.1.332 and 2.1.209: case fanout-start-deferred);
            ``False``: inside the call, before it returns. The 2.1.209 profile keeps ``False``: its
            flat key chain orders keys by call order, and deferred slots then race the answers to
            calls already made; in Claude Code a model answer is always slower than a 0 ms timer,
            but a replayed or fake answer is not, so only slots started inside the call give the
            keys 2.1.209 journaled (fixture fanout-edges-2.1.209) and let its runs resume here.
        child_error_message_is_stack: a child workflow's throw reaches the parent with the child's whole
            stack text as its ``message`` (2.1.209, measured: ``'Error: child string'`` for a thrown
            string); 2.1.332 keeps the bare message.
        child_parse_error_at_call: a child workflow whose meta reads but whose code does not parse is
            listed among the available workflows, and ``workflow()`` of it rejects with the parse error
            (2.1.332, measured, ``errors-child-resolution-messages``); 2.1.209 does not see it (``no
            workflow with that name``).
        plugin_workflows_last_wins: when plugin files give one visible workflow name, the last one
            Claude reads wins (plugins in their enabling order, each plugin's ``workflows/`` in
            directory order); 2.1.209 keeps the first (measured: ``plugins-order-of-plugins`` and five
            files of one plugin declaring one name). Plugin agents: the last plugin wins in both.
    """

    name: str
    max_file_bytes: int = 524_288
    max_inline_code_units: int = 524_288
    max_agent_calls: int = 1_000
    max_fanout_items: int = 4_096
    boundary_child_depth: int = 100_000
    boundary_final_depth: int = 28_000
    max_meta_depth: int = 4_000
    sync_timeout_ms: int = 30_000
    log_line_max_chars: int = 11_024
    log_line_keep_chars: int = 5_000
    max_log_lines: int = 100_000
    max_log_chars: int = 64 * 1024 * 1024
    max_run_events: int = 1_000_000
    max_output_deltas: int = 250_000
    stall_window_ms: int = 180_000
    stall_retries: int = 5
    schema_retries: int = 5
    cache_key_options: tuple[str, ...] = ("schema", "model", "effort", "isolation", "agentType")
    agent_options: tuple[str, ...] = (
        "label",
        "phase",
        "schema",
        "model",
        "effort",
        "isolation",
        "agentType",
        "stallMs",
    )
    efforts: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
    isolations: tuple[str, ...] = ("worktree",)
    import_refused_at_load: bool = True
    journal_started_has_label: bool = True
    budget_from_turn: bool = False
    flat_cache_chain: bool = False
    fanout_start_deferred: bool = True
    child_error_message_is_stack: bool = False
    child_parse_error_at_call: bool = True
    max_concurrency: int = 16
    min_concurrency: int = 2
    # Agent definitions (measured 2026-12-01, NOTES.md#agent-frontmatter, #2.1.209-extra): an agent
    # file may start with a UTF-8 BOM; a frontmatter name holding ':' is not loaded.
    agent_file_bom: bool = True
    agent_colon_names: bool = False
    # agent() schemas (measured 2026-12-01, cases schema-*): refused unless the root declares
    # type 'object'; Ajv strict mode refuses unknown keywords; a top-level string property is
    # converted to the type its schema asks for.
    schema_object_root: bool = True
    schema_strict_keywords: bool = True
    schema_coercion: bool = True
    # Claude's own refusals (invalid or unusable schemas, the StructuredOutput retry cap, tool lists)
    # are named TelemetrySafeError; 2.1.209 named an invalid schema TypeError, the rest Error.
    telemetry_safe_errors: bool = True
    plugin_workflows_last_wins: bool = True


PROFILES: dict[str, Profile] = {
    # profile claude-code/2.1.332: measured with the oracle on 2026-11-30 (PROFILE-FACTS).
    "claude-code/2.1.332": Profile(
        name="claude-code/2.1.332",
        cache_key_options=(
            "schema",
            "model",
            "effort",
            "isolation",
            "agentType",
            "disallowedTools",
            "bashCommandClamp",
        ),
        agent_options=(
            "label",
            "phase",
            "schema",
            "model",
            "effort",
            "isolation",
            "agentType",
            "stallMs",
            "disallowedTools",
            "bashCommandClamp",
            "sharedHeadLength",
        ),
    ),
    # profile claude-code/2.1.209: the release the specification was written against.
    "claude-code/2.1.209": Profile(
        name="claude-code/2.1.209",
        max_meta_depth=2_000,
        import_refused_at_load=False,
        journal_started_has_label=False,
        budget_from_turn=True,
        flat_cache_chain=True,
        fanout_start_deferred=False,
        child_error_message_is_stack=True,
        child_parse_error_at_call=False,
        agent_file_bom=False,
        agent_colon_names=True,
        schema_object_root=False,
        schema_strict_keywords=False,
        schema_coercion=False,
        telemetry_safe_errors=False,
        plugin_workflows_last_wins=False,
    ),
}

DEFAULT_PROFILE = "claude-code/2.1.332"


def get_profile(name: str | None = None) -> Profile:
    """Return the profile called ``name`` (default ``claude-code/2.1.332``).

    Raises:
        KeyError: with the list of known profiles, when ``name`` is unknown.
    """
    key = name or DEFAULT_PROFILE
    try:
        return PROFILES[key]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown profile {key!r}; known profiles: {known}") from None


def default_concurrency(profile: Profile | None = None, cpus: int | None = None) -> int:
    """``min(16, max(2, cpus - 2))`` — profile claude-code/2.1.209 and 2.1.332."""
    p = profile or get_profile()
    n = cpus if cpus is not None else (os.cpu_count() or 2)
    return min(p.max_concurrency, max(p.min_concurrency, n - 2))
