export const meta = {
  name: 'review-changes',
  description: 'Review changed files in parallel, verify every finding adversarially, then summarise',
  whenToUse: 'Before merging a branch: pass the changed files as args.files',
  phases: [
    { title: 'Review', detail: 'One reviewer per file' },
    { title: 'Verify', detail: 'An adversarial check of each finding' },
    { title: 'Summarise' },
  ],
}

// args: { files: string[] } or a JSON string of the same (some invokers pass strings).
const input = typeof args === 'string' ? JSON.parse(args) : (args ?? {})
const files = Array.isArray(input.files) && input.files.length ? input.files : ['src/app.ts', 'src/db.ts', 'src/auth.ts']

const findingsSchema = {
  type: 'object',
  properties: {
    findings: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          line: { type: 'integer', minimum: 1 },
          severity: { type: 'string', enum: ['low', 'medium', 'high'] },
          summary: { type: 'string', minLength: 1 },
        },
        required: ['line', 'severity', 'summary'],
      },
    },
  },
  required: ['findings'],
}
const verdictSchema = {
  type: 'object',
  properties: { real: { type: 'boolean' }, reason: { type: 'string' } },
  required: ['real'],
}

phase('Review')
const reviews = await parallel(files.map((file) => () =>
  agent(`Review ${file} for defects. Report each with its line, a severity and a one-line summary.`, {
    label: `review:${file}`,
    schema: findingsSchema,
  }),
))

const findings = []
reviews.forEach((review, i) => {
  if (review === null) { log(`review of ${files[i]} failed; continuing without it`); return }
  for (const f of review.findings) findings.push({ file: files[i], ...f })
})
log(`${findings.length} findings from ${files.length} files`)

phase('Verify')
const verdicts = await parallel(findings.map((f) => () =>
  agent(`Try to refute this finding in ${f.file} at line ${f.line}: ${f.summary}. Is it real?`, {
    label: `verify:${f.file}:${f.line}`,
    schema: verdictSchema,
    effort: 'high',
  }),
))
const confirmed = findings.filter((f, i) => verdicts[i]?.real === true)

phase('Summarise')
const summary = confirmed.length
  ? await agent(`Write a short merge recommendation for these confirmed findings: ${JSON.stringify(confirmed)}`, { label: 'summary' })
  : 'No confirmed findings.'

return { files: files.length, findings: findings.length, confirmed, summary }
