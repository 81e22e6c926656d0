"""A mutation fuzzer for workflow sources, shared by ``tests/unit/definitions/test_fuzz.py`` (bounded, in
CI) and ``benchmarks/fuzz.py`` (longer, prints counts).

Seeds are the conformance and example workflow files. Each mutant is the seed with a few edits: a
hostile fragment inserted (lexer edge cases, lone surrogates, deep nesting, an escape payload), a range
deleted or duplicated, a character replaced. Every mutant is validated; the ones validate accepts also
run in the real realm on the fake provider. What counts:

- ``crash``: an exception other than a load refusal escaped validate, load or run, or a run failed with
  an internal error;
- ``hang``: validate or a run did not finish within its bound;
- ``unnamed``: a refusal without a rule, or without a line where the rule is about a place in the file;
- ``disagree``: ``load_workflow`` did not raise exactly validate's first error (or raised on a valid file);
- ``escape``: a run reached a host object (the payload then logs ``ESCAPED:<pid>``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from workflow_mcp.definitions._analysis import Analysis, analyze_source, check_analyses
from workflow_mcp.definitions.load import load_workflow
from workflow_mcp.definitions.profile import get_profile
from workflow_mcp.engine.run import RunOptions, run_workflow
from workflow_mcp.errors import RunFailedError, WorkflowLoadError
from workflow_mcp.providers import FakeProvider

__all__ = ["FuzzReport", "fuzz", "main_report", "seeds"]

ROOT = Path(__file__).resolve().parents[1]

# Rules about the file as a whole: they have no line.
WHOLE_FILE_RULES = frozenset({"file-too-large", "source-too-large", "empty-file"})

PAYLOAD = (
    "\ntry { await import('x') } catch (e) { try { const p = e.constructor.constructor('return process')();"
    " log(['ESC', 'APED'].join('') + ':' + p.pid) } catch (x) {} }\n"
)
FRAGMENTS = [
    "<!--",
    "-->",
    "\n-->",
    "\u2028",
    "\u2029",
    "\r",
    "`",
    "${",
    "}",
    "'",
    '"',
    "/*",
    "*/",
    "//",
    "\\",
    "/",
    "#!",
    "\ufeff",
    "import('x')",
    " await using x = y ",
    "String.raw`\\u{zz}`",
    "\\uD800",
    "'\\uDFFF'",
    "\U0001f600",
    "\ud800",
    "[" * 600 + "]" * 600,
    "{a:" * 300 + "1" + "}" * 300,
    "__proto__: 1,",
    "x: 1, " * 50,
    PAYLOAD,
    "<!-- `" + PAYLOAD + "// `",
    "// c\u2028" + PAYLOAD,
]


def seeds() -> list[str]:
    """Every conformance and example workflow source, decoded (undecodable seeds are skipped)."""
    files = sorted((ROOT / "tests" / "conformance" / "cases").rglob("*.js")) + sorted(
        (ROOT / "examples").glob("*.js")
    )
    out = []
    for f in files:
        try:
            out.append(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return out


# Edits aimed at the meta object, the part of a file the loader reads value by value.
META_FRAGMENTS = [
    "x: '\\uD800', ",
    "name2: '\\uDFFF\\uD800', ",
    "deep: " + "[" * 600 + "]" * 600 + ", ",
    "deep: " + "{a:" * 600 + "1" + "}" * 600 + ", ",
    "".join(f"k{i}: {i}, " for i in range(2000)),
    "'\\u2028': 1, ",
]
META_OPEN = "export const meta = {"


def mutate(source: str, rng: random.Random) -> str:
    """``source`` with one to three random edits."""
    text = source
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        at = rng.randint(0, len(text))
        meta_at = text.find(META_OPEN)
        if op < 0.1 and meta_at >= 0:
            at = meta_at + len(META_OPEN)
            text = text[:at] + " " + rng.choice(META_FRAGMENTS) + text[at:]
        elif op < 0.55:
            text = text[:at] + rng.choice(FRAGMENTS) + text[at:]
        elif op < 0.7 and text:
            end = min(len(text), at + rng.randint(1, 40))
            text = text[:at] + text[end:]
        elif op < 0.85 and text:
            end = min(len(text), at + rng.randint(1, 80))
            text = text[:end] + text[at:end] + text[end:]
        elif text:
            i = min(at, len(text) - 1)
            text = text[:i] + rng.choice("{}()[];,.'\"`/\\\n *=<>!-") + text[i + 1 :]
    return text


@dataclass
class FuzzReport:
    """Counts per outcome, and up to five examples of each failure kind."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, example: str | None = None) -> None:
        self.counts[kind] += 1
        if example is not None:
            self.examples.setdefault(kind, [])
            if len(self.examples[kind]) < 5:
                self.examples[kind].append(example)

    @property
    def failures(self) -> dict[str, int]:
        return {
            k: v for k, v in self.counts.items() if k in ("crash", "hang", "unnamed", "disagree", "escape")
        }


def _validate_batch(report: FuzzReport, mutants: list[str], deadline_s: float) -> list[str]:
    """Validate ``mutants`` through the loader's batch path (one realm call); return the valid ones."""
    profile = get_profile()
    started = time.monotonic()
    analyses: list[Analysis | None] = []
    for text in mutants:
        try:
            analyses.append(analyze_source(text, profile, label="mutant.js"))
        except Exception as exc:  # a crash is what this counts
            report.note("crash", f"validate: {type(exc).__name__}: {exc} :: {text[:300]!r}")
            analyses.append(None)
    try:
        check_analyses([a for a in analyses if a is not None])
    except Exception as exc:
        report.note("crash", f"syntax check: {type(exc).__name__}: {exc}")
        return []
    if time.monotonic() - started > deadline_s:
        report.note("hang", f"a batch of {len(mutants)} took {time.monotonic() - started:.1f} s")
    valid = []
    for text, analysis in zip(mutants, analyses, strict=True):
        if analysis is None:
            continue
        if analysis.errors:
            report.note("refused")
            first = analysis.errors[0]
            if not first.rule or (first.line is None and first.rule not in WHOLE_FILE_RULES):
                report.note("unnamed", f"{first.rule}: {first} :: {text[:200]!r}")
        else:
            report.note("accepted")
            valid.append(text)
    return valid


def _check_load_agrees(report: FuzzReport, text: str) -> None:
    try:
        expected = analyze_source(text, get_profile(), label="mutant.js")
        check_analyses([expected])
    except Exception as exc:
        report.note("crash", f"validate: {type(exc).__name__}: {exc} :: {text[:200]!r}")
        return
    try:
        load_workflow("mutant.js", source=text)
    except WorkflowLoadError as exc:
        if not expected.errors or exc.to_json() != expected.errors[0].to_json():
            report.note("disagree", f"load raised {exc.to_json()} :: {text[:200]!r}")
        return
    except Exception as exc:
        report.note("crash", f"load: {type(exc).__name__}: {exc} :: {text[:200]!r}")
        return
    if expected.errors:
        report.note("disagree", f"load accepted, validate refused {expected.errors[0]} :: {text[:200]!r}")


async def _run_one(report: FuzzReport, text: str, timeout_s: float) -> None:
    try:
        workflow = load_workflow("mutant.js", source=text)
    except WorkflowLoadError:
        return
    except Exception as exc:
        report.note("crash", f"load: {type(exc).__name__}: {exc} :: {text[:200]!r}")
        return
    handle = run_workflow(
        workflow,
        provider=FakeProvider(),
        args={"files": ["a.ts"], "topic": "t", "n": 2},
        options=RunOptions(sync_timeout_ms=1000, heap_mb=256, concurrency=4),
    )
    try:
        await asyncio.wait_for(handle.result(), timeout_s)
        report.note("ran")
    except RunFailedError as exc:
        report.note("run-failed")
        if "internal error" in exc.message or "Traceback" in exc.message:
            report.note("crash", f"run: {exc.message[:300]} :: {text[:200]!r}")
    except TimeoutError:
        report.note("hang", f"run exceeded {timeout_s} s :: {text[:200]!r}")
        handle.cancel()
    except Exception as exc:
        report.note("crash", f"run: {type(exc).__name__}: {exc} :: {text[:200]!r}")
    for event in handle.log.events:
        # Only execution can produce this text: the source spells it in two pieces.
        if event.type == "log" and "ESCAPED:" in str(event.payload.get("message", "")):
            report.note("escape", text)


async def _run_all(report: FuzzReport, texts: list[str], timeout_s: float, parallel: int) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(text: str) -> None:
        async with gate:
            await _run_one(report, text, timeout_s)

    await asyncio.gather(*(one(t) for t in texts))


def fuzz(
    *,
    seed: int,
    budget_s: float,
    batch: int = 200,
    runs_per_batch: int = 12,
    agree_per_batch: int = 4,
    run_timeout_s: float = 20.0,
) -> FuzzReport:
    """Mutate and check until ``budget_s`` seconds have passed (each step is bounded on its own)."""
    rng = random.Random(seed)
    corpus = seeds()
    report = FuzzReport()
    stop = time.monotonic() + budget_s
    while time.monotonic() < stop:
        mutants = [mutate(rng.choice(corpus), rng) for _ in range(batch)]
        report.counts["mutants"] += len(mutants)
        valid = _validate_batch(report, mutants, deadline_s=60.0)
        for text in rng.sample(mutants, min(agree_per_batch, len(mutants))):
            _check_load_agrees(report, text)
        chosen = rng.sample(valid, min(runs_per_batch, len(valid)))
        asyncio.run(_run_all(report, chosen, run_timeout_s, parallel=4))
    return report


def main_report(report: FuzzReport) -> str:
    """A printable summary (counts, then examples of each failure kind)."""
    lines = [", ".join(f"{k}={v}" for k, v in sorted(report.counts.items()))]
    for kind, examples in report.examples.items():
        lines.append(f"{kind}:")
        lines.extend(f"  {e}" for e in examples)
    return "\n".join(lines)
