"""The ``author-workflow`` prompt: a self-contained guide to writing a Claude-compatible workflow,
generated from the same :class:`~workflow_mcp.definitions.profile.Profile` data the runtime enforces,
so the numbers in the guide are the numbers the loader and the engine use."""

from __future__ import annotations

from ..definitions.profile import Profile, get_profile

__all__ = ["author_workflow_guide"]

_EXAMPLE = """\
export const meta = {
  name: 'review-files',
  description: 'Review each file in parallel, then summarise the findings',
  whenToUse: 'Pass the files to review as args.files',
  phases: [{ title: 'Review' }, { title: 'Summarise' }],
}

const files = (args && Array.isArray(args.files)) ? args.files : []
const findingsSchema = {
  type: 'object',
  properties: { findings: { type: 'array', items: { type: 'string' } } },
  required: ['findings'],
}

phase('Review')
const reviews = await parallel(files.map((file) => () =>
  agent(`Review ${file} and list concrete defects.`, { label: `review:${file}`, schema: findingsSchema }),
))
const findings = reviews.flatMap((r, i) => (r === null ? [] : r.findings.map((f) => `${files[i]}: ${f}`)))
log(`${findings.length} findings`)

phase('Summarise')
const summary = findings.length
  ? await agent(`Summarise these findings for a reviewer:\\n${findings.join('\\n')}`, { label: 'summary' })
  : 'nothing found'
return { findings, summary }
"""


def author_workflow_guide(task: str | None = None, profile: Profile | None = None) -> str:
    """The guide text; ``task`` (optional) is what the user wants the workflow to do."""
    p = profile or get_profile()
    cache_opts = ", ".join(f"`{o}`" for o in p.cache_key_options)
    options = ", ".join(f"`{o}`" for o in p.agent_options)
    efforts = ", ".join(f"`{e}`" for e in p.efforts)
    stall_s = p.stall_window_ms // 1000
    sync_s = p.sync_timeout_ms // 1000
    goal = (
        f"Write a workflow for this task:\n\n{task.strip()}\n\n"
        if task and task.strip()
        else "Write a workflow for the task the user describes.\n\n"
    )
    return f"""{goal}# Writing a Claude Code dynamic workflow (profile {p.name})

A workflow is one JavaScript file, `.claude/workflows/<name>.js` (project) or
`~/.claude/workflows/<name>.js` (personal). The same file runs unchanged in Claude Code and in
workflow-mcp. It orchestrates agents; it does not do the work itself.

## File rules (checked before anything runs)
- At most {p.max_file_bytes:,} bytes. UTF-8. Extension `.js` (`.mjs`, `.cjs`, `.ts` are not found).
- The first statement is `export const meta = {{ ... }}` with pure literals only: strings (no
  `${{}}` interpolation), numbers, booleans, null, arrays and objects. No variables, calls, spreads,
  getters, computed keys, or `__proto__`/`constructor`/`prototype` keys.
- `meta.name` and `meta.description` are required non-empty strings; `title`, `whenToUse` and
  `phases` (`[{{ title, detail?, model? }}]`) are optional.
- The body is strict-mode code with top-level `await` and `return`. The body cannot see `meta`.
- Refused: `import`/`import()`, `require`, `await using`, `with`.

## Globals
- `agent(prompt, options?)` → the agent's text, or the parsed object when `options.schema` (a JSON
  Schema) is given. Options: {options}. `effort` is one of {efforts}; unknown options are ignored.
  A provider failure or a user skip resolves `null`; an execution error rejects. Structured output
  is validated and re-asked up to {p.schema_retries} times. A call with no progress for `stallMs`
  (default {stall_s} s) is retried up to {p.stall_retries} times.
- `parallel(thunks)` runs `() => agent(...)` thunks concurrently, at most {p.max_fanout_items:,} items;
  results keep input order and a failed slot becomes `null`.
- `pipeline(items, ...stages)` streams each item through the stages with no barrier between stages;
  each stage gets `(previousResult, originalItem, index)`; a stage returning `null` skips the rest
  for that item.
- `workflow(name | {{ scriptPath }}, args?)` runs another workflow, one level deep, sharing the
  limits and the budget.
- `phase(title)` marks progress; `log(message)` records a line; `args` is the caller's JSON value
  (may be `undefined`); `budget.total`, `budget.spent()`, `budget.remaining()` count output tokens.
- `console`, `setTimeout`/`clearTimeout` and the ECMAScript built-ins. No `fetch`, `process`, file
  system or network: agents do that work.

## Limits
- At most {p.max_agent_calls:,} `agent()` calls per run (nested workflows included).
- Concurrency defaults to min({p.max_concurrency}, max({p.min_concurrency}, CPUs - 2)).
- At most {sync_s} s of synchronous JavaScript at a time (also after each `await`).
- Once `budget.spent() >= budget.total`, `agent()` is refused.

## Determinism (resume replays the file)
- `Date.now()`, `Date()`, `new Date()` without arguments and `Math.random()` throw: pass timestamps
  and seeds through `args`.
- Results are cached by prompt and the execution-affecting options ({cache_opts}); keep prompts
  stable so a resumed run replays finished calls instead of paying for them again.

## Good habits
- Guard `args` (`const files = (args && args.files) || []`) and validate it early.
- Use `schema` whenever code reads an agent's answer; check for `null` from `parallel()` slots.
- Label every call (`label`) and use `phase()` so progress is readable.
- Return one JSON value (no functions, no cycles).

## Example
```js
{_EXAMPLE}```

## Check and run it with the workflow-mcp tools
1. `workflow_validate` with `script` (or `path`) — fix every error it reports (rule, line:column).
2. `workflow_run` with `provider: "fake"` — a dry run with synthesized answers, no model calls.
3. `workflow_run` with a real provider; follow it with `workflow_run_events` or
   `workflow_run_await`, and resume a failed run with `resumeFromRunId`.

## Keep it in the library (the author loop)
1. `workflow_validate` with `script` until it reports no error.
2. `workflow_create_draft` with `script` (and `tags`, `category`): kept outside `.claude/workflows`, so
   Claude Code does not see it yet; a draft you created is approved for you to run.
3. `workflow_run` with `name: "<meta.name>@draft"` (provider `fake` first); edit and store the draft
   again until the run does what the task needs.
4. `workflow_create` with the same `script` and a `version` (semver, e.g. `1.0.0`) to promote it: it is
   written as `.claude/workflows/<name>.js`, exactly the source you gave, and the draft is removed.
   A later revision needs a new version; `workflow_get` returns any stored version's source.
"""
