export const meta = {
  name: 'extract-until-dry',
  description: 'Extract coding rules round after round until no new ones appear or the token budget is spent',
  whenToUse: 'Mining conventions from a codebase; run with --token-budget to bound the cost',
  phases: [{ title: 'Extract' }, { title: 'Verify' }, { title: 'Rank' }],
}

const rulesSchema = {
  type: 'object',
  properties: { rules: { type: 'array', items: { type: 'string', minLength: 1 } } },
  required: ['rules'],
}
const maxRounds = (args && args.maxRounds) || 6
const found = new Map()
let round = 0

phase('Extract')
while (budget.remaining() > 0 && round < maxRounds) {
  round++
  const known = [...found.keys()]
  const out = await agent(
    `Round ${round}: list coding rules this repository follows. Already known: ${known.join('; ') || 'none'}.`,
    { label: 'extract', schema: rulesSchema },
  )
  const fresh = (out?.rules ?? []).filter((r) => !found.has(r))
  log(`round ${round}: ${fresh.length} new rules (budget left: ${budget.remaining()})`)
  if (fresh.length === 0) break
  for (const r of fresh) found.set(r, round)
}

phase('Verify')
const candidates = [...found.keys()]
const checks = await parallel(candidates.map((rule) => () =>
  agent(`Find two places in the code that follow this rule, or say it is not real: ${rule}`, {
    label: `verify:${rule.slice(0, 30)}`,
    schema: { type: 'object', properties: { real: { type: 'boolean' } }, required: ['real'] },
  }),
))
const real = candidates.filter((_, i) => checks[i]?.real === true)

phase('Rank')
const ranking = real.length
  ? await agent(`Rank these rules by how much they matter to a new contributor: ${real.join('; ')}`, { label: 'rank' })
  : null

return { rounds: round, rules: real, firstSeen: Object.fromEntries(found), ranking, spent: budget.spent() }
